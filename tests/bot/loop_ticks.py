"""How often the event loop gets to run while a call is awaited: a task that ticks every 10 ms ticks
about a hundred times a second on a free loop, and not at all while a blocking call holds it."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType


class LoopTicks:
    def __init__(self) -> None:
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopTicks:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # started: it ticks once now
        self.ticks = 0
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _tick(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0.01)
