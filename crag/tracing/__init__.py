"""A turn's trace: its accounting (LLM calls, tokens, notices), its OpenTelemetry spans, and where they
are exported."""
