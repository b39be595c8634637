"""Web search providers: off (default) and, later, SerpAPI."""
