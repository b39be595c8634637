"""GET /api/health: whether the bot is up (200) or not yet or no longer (503), for probes and load
balancers; and, to whom may see them, the details: the index, the providers, the cache, and the
damaged files moved aside on this start."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from hosting.app_settings import BotSettings

# (HTTP status, payload with at least "status"): the engine handle's report.
Status = Callable[[], tuple[int, dict[str, object]]]


class HealthRoute:
    def __init__(self, settings: BotSettings, status: Status, quarantined: Callable[[], list[str]]) -> None:
        """quarantined: the paths of the damaged feedback / state files moved aside on this start."""
        self._settings = settings
        self._status = status
        self._quarantined = quarantined

    async def get(self, request: web.Request) -> web.Response:
        status, payload = self._status()
        if not self.may_see_details(request):
            # An internet-facing bot tells an anonymous caller whether it is up, not what it holds.
            return web.json_response({"status": payload["status"]}, status=status)
        # Damaged feedback / state files moved aside on this start: someone should look at them.
        payload["quarantined_files"] = [Path(p).name for p in self._quarantined()]
        return web.json_response(payload, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=False))

    def may_see_details(self, request: web.Request) -> bool:
        if not self._settings.app_id:
            return True  # local mode: loopback only
        key = self._settings.health_key.get_secret_value()
        given = request.headers.get("X-Health-Key", "")
        return bool(key) and hmac.compare_digest(given.encode(), key.encode())
