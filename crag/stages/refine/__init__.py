"""Knowledge refinement: keep only what bears on the question (the LLM refiner lives in
crag/providers/llm)."""
