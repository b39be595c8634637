"""Idle and trickling (slowloris) connections are closed: the real `python app.py`, raw sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

TIMEOUT = 2.0  # CRAG_HTTP_CLIENT_TIMEOUT for this app


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("slow"), SAMPLE_DOCS, CRAG_HTTP_CLIENT_TIMEOUT=str(TIMEOUT))
    proc.start()
    yield proc
    proc.stop()


async def _lifetime(app: AppProcess, trickle: bytes, limit: float) -> float:
    """Seconds until the server closes a connection that sends `trickle` one byte every 0.1 s
    (nothing at all if empty); `limit` if it is still open then."""
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    start = time.monotonic()

    async def send() -> None:
        for byte in trickle:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.1)

    sender = asyncio.create_task(send())
    try:
        while time.monotonic() - start < limit:
            try:
                data = await asyncio.wait_for(reader.read(65536), limit - (time.monotonic() - start))
            except TimeoutError:
                break
            except ConnectionError:
                return time.monotonic() - start
            if not data:
                return time.monotonic() - start
        return limit
    finally:
        sender.cancel()
        writer.close()


async def test_idle_and_trickling_connections_are_closed(app: AppProcess) -> None:
    headers = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Padding: slowloris\r\n" * 20
    lifetimes = await asyncio.gather(
        *[_lifetime(app, b"", 8.0) for _ in range(20)], *[_lifetime(app, headers, 8.0) for _ in range(20)]
    )
    print(f"idle: max {max(lifetimes[:20]):.1f} s, trickling: max {max(lifetimes[20:]):.1f} s")
    assert max(lifetimes) < TIMEOUT + 1.5, lifetimes
    # The server still answers everyone else.
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    writer.write(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 200")
    writer.close()


async def test_a_body_sent_byte_by_byte_gets_408(app: AppProcess) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    writer.write(
        b"POST /api/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    start = time.monotonic()

    async def trickle() -> None:
        for _ in range(200):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.1)

    sender = asyncio.create_task(trickle())
    try:
        status = await asyncio.wait_for(reader.readline(), 8)
    finally:
        sender.cancel()
        writer.close()
    print(f"trickled body: {status!r} after {time.monotonic() - start:.1f} s")
    assert status.startswith(b"HTTP/1.1 408")
