"""Why a request may not see the dashboard: an HTTP status, the text the person reads, the log's reason."""

from __future__ import annotations


class Denied(Exception):
    def __init__(self, status: int, text_key: str, reason: str, retry_after: float = 0.0) -> None:
        super().__init__(reason)
        self.status = status
        self.text_key = text_key  # hosting/ui_texts/catalog.toml: what the page or the JSON error says
        self.reason = reason  # for the log line (never a key or a token)
        self.retry_after = retry_after
