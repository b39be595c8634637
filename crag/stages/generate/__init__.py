"""Answer generation from the kept knowledge, with citations."""
