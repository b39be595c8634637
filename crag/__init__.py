"""The CRAG engine (rewrite -> retrieve -> grade -> decide -> [web] -> generate) and its providers."""
