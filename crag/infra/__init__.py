"""Plumbing the engine's stages share: answer caches, the circuit breaker, tracing, outbound HTTP (proxy,
retry), safe links."""
