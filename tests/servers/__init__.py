"""Throwaway servers for tests that need a real service (one module per service)."""
