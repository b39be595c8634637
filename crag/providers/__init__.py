"""Clients of outside services the engine's stages call: the language model (llm), web search (web) and
Microsoft Graph (graph)."""
