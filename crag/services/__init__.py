"""Clients of outside services: the language model (llm), web search (web) and Microsoft Graph (graph)."""
