"""GraphError, apart from the client: modules that only catch it need not import the Graph SDK."""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal["settings", "auth", "forbidden", "not_found", "throttled", "gone", "unavailable"]


class GraphError(Exception):
    """A Graph request failed. The message is safe to show; kind says what to do about it."""

    def __init__(
        self,
        message: str,
        kind: ErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
        location: str = "",
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after  # seconds, for kind == "throttled"
        self.location = location  # the Location header of a 410 (a fresh delta enumeration)

    @property
    def is_settings(self) -> bool:
        """A problem of configuration (credentials, permissions, names): retrying will not help."""
        return self.kind in ("settings", "auth", "forbidden", "not_found")
