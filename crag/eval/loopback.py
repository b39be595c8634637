"""Serve an aiohttp app on 127.0.0.1 at a free port: the fake services of the eval and the tests."""

from __future__ import annotations

import ssl

from aiohttp import web


async def serve_on_loopback(
    app: web.Application, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, str]:
    """Start app; returns its runner (cleanup() stops it) and its base URL. With ssl_context the app
    is served over TLS (https://127.0.0.1:PORT): for clients that refuse anything else, such as
    azure-identity's token requests."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    server = site._server
    assert server is not None and server.sockets  # type: ignore[attr-defined]
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    scheme = "https" if ssl_context is not None else "http"
    return runner, f"{scheme}://127.0.0.1:{port}"


class LoopbackServer:
    """A fake service on 127.0.0.1: a subclass adds its routes (`routes`); `start` serves them at a
    free port and returns the base URL (also `url`), `stop` ends it. Every fake of the eval, the
    tests and the benchmarks has this same lifecycle."""

    # aiohttp's default request-body limit, raised by fakes that receive whole documents.
    client_max_size = 1024**2

    def __init__(self) -> None:
        self.url = ""
        self._runner: web.AppRunner | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        app = web.Application(client_max_size=self.client_max_size)
        self.routes(app)
        self._runner, self.url = await serve_on_loopback(app, ssl_context)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
