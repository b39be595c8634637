"""How the engine reaches outside services: Entra ID tokens instead of keys, the proxy settings, retry
timing, the circuit breaker and the one way Redis is opened."""
