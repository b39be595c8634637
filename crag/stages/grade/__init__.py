"""Relevance graders: chunk x question -> 0.0-1.0 on the rubric."""
