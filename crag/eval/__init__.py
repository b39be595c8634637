"""Evaluation on a dataset folder: python -m crag.cli.eval DATASET_DIR --out OUT_DIR."""
