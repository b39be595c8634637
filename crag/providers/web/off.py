"""The web search used when none is configured: it says so instead of searching."""

from __future__ import annotations

from crag.config.engine_settings import CragSettings
from crag.core.models import WebOutcome, WebStatus


class WebSearchOff:
    name = "off"

    async def search(self, query: str, num: int) -> WebOutcome:
        return WebOutcome(status=WebStatus.OFF, message="Web search is not configured.")


def configured(settings: CragSettings) -> bool:
    return True


def build(settings: CragSettings) -> WebSearchOff:
    return WebSearchOff()
