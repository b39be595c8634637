"""Floor 0 of the engine: its data models, the provider protocols, the routing thresholds, the asker's
identity and the engine's own texts. Imports nothing else of crag."""
