"""Serve an aiohttp app on 127.0.0.1 at a free port: the fake services of the eval and the tests."""

from __future__ import annotations

from aiohttp import web


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start app; returns its runner (cleanup() stops it) and its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None and server.sockets  # type: ignore[attr-defined]
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    return runner, f"http://127.0.0.1:{port}"
