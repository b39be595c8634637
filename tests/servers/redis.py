"""A real redis-server (Debian package redis-server) on loopback: no persistence, a free port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.servers.harness import free_port, unavailable

START_TIMEOUT_S = 30.0


class RedisServer:
    def __init__(self, password: str = "") -> None:
        self.port = free_port()
        self.password = password
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("redis-server is not installed (apt-get install redis-server)")
            return
        self._proc = subprocess.Popen(
            [
                binary,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
                *(("--requirepass", self.password) if self.password else ()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers_ping():
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}: {err[-500:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.05)

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                # With a password the server answers -NOAUTH: it is up all the same.
                return s.recv(16).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (also the way a test kills Redis under a running bot)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()


@contextmanager
def running_redis(password: str = "") -> Iterator[RedisServer]:
    """A started server, stopped on exit (a test module wraps it in its own fixture)."""
    server = RedisServer(password)
    server.start()
    try:
        yield server
    finally:
        server.stop()
