"""Floor 1: every setting of the engine, read from the environment and .env (one model per service, gathered
by CragSettings)."""
