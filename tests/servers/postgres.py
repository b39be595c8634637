"""A throwaway PostgreSQL server for tests: initdb into a temp dir, listen on a free 127.0.0.1 port and
a unix socket in that dir, fsync off, stopped at the end of the session.

Fixtures (a pytest plugin: tests/conftest.py lists it in `pytest_plugins`):
    postgres_server  session-scoped PostgresServer
    postgres_dsn     function-scoped: a fresh empty database, dropped afterwards; its DSN

initdb and postgres refuse to run as root: as root, they run as the `postgres` system user (runuser),
in a temp dir owned by it. Without the binaries the tests are skipped, unless CRAG_REQUIRE_SERVICES=1
(CI): then they fail. CRAG_POSTGRES_BINDIR names the binaries' directory when they are elsewhere.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.servers.harness import free_port, unavailable

SUPERUSER = "postgres"


def _bindir() -> Path | None:
    """Where initdb, pg_ctl and postgres are: CRAG_POSTGRES_BINDIR if set, else PATH, else Debian's
    /usr/lib/postgresql/<newest>/bin."""
    chosen = os.environ.get("CRAG_POSTGRES_BINDIR")
    if chosen:
        return Path(chosen) if (Path(chosen) / "initdb").is_file() else None
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


class PostgresServer:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="crag-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                raise RuntimeError("running as root, and no 'postgres' user to run the server as") from None
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=120, cwd=self.root, check=False
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr[-2000:]}\n{log}")

    def init(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        pg_ctl = str(self.bindir / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """The server is down inside the block (connections refused), up again after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    async def create_database(self) -> str:
        import asyncpg

        name = f"t_{uuid.uuid4().hex[:16]}"
        conn = await asyncpg.connect(self.dsn())
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return name

    async def drop_database(self, name: str) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.dsn())
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = _bindir()
    if bindir is None:
        unavailable("PostgreSQL is not installed (initdb not found; apt-get install postgresql)")
        raise AssertionError("unreachable")
    try:
        server = PostgresServer(bindir)
    except RuntimeError as exc:
        unavailable(str(exc))
        raise AssertionError("unreachable") from None
    try:
        server.init()
        server.start()
    except Exception:
        server.remove()
        raise
    yield server
    server.remove()


@pytest.fixture
async def postgres_dsn(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """A fresh, empty database on the session's server (dropped after the test)."""
    name = await postgres_server.create_database()
    yield postgres_server.dsn(name)
    await postgres_server.drop_database(name)


def feedback_cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m feedback ARGS` (the ratings store's CLI) against the PostgreSQL at dsn."""
    env = {**os.environ, "CRAG_POSTGRES_URL": dsn, "CRAG_FEEDBACK_STORE": "postgres"}
    return subprocess.run(
        [sys.executable, "-m", "feedback", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
