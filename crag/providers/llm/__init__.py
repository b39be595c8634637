"""The language-model client (Azure OpenAI, OpenAI, OpenAI-compatible servers) and its prompts.

Each stage's LLM provider lives beside its local one: grade/llm.py, rewrite/llm.py, generate/llm.py,
refine/llm.py, embed/llm.py.
"""
