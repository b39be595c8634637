"""The one wiring point: builds providers from settings (factory), owns the open index and its watchers
(handle)."""
