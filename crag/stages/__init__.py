"""The CRAG steps the engine calls through protocols: rewrite, grade, refine and generate, each local and
LLM."""
