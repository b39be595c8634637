"""Web search providers (SerpAPI, off), registered in crag/config/providers.py."""
