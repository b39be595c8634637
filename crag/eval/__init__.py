"""Evaluation on a dataset folder: python -m crag.eval DATASET_DIR --out OUT_DIR."""
