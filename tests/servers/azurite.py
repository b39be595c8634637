"""Azurite's Blob service (npm `azurite`, Microsoft's Azure Storage emulator, installed in
tests/servers/node_modules by tools/test_servers_install.sh) on loopback: a free port, data in
memory only, telemetry off (Azurite collects it by default), any API version accepted, loose mode
(see start)."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers.harness import free_port, unavailable

BIN = Path(__file__).resolve().parent / "node_modules" / ".bin" / "azurite-blob"
START_TIMEOUT_S = 60.0
# The storage emulator's documented, public development account (not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class AzuriteBlob:
    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        """tls: a certificate and key (PEM): served over https with Azurite's OAuth check on, as
        Azure's keyless accounts are (it reads a bearer token's issuer, audience and lifetime, not
        its signature; it refuses bearer tokens over http)."""
        self.port = free_port()
        self.tls = tls
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};"
        )

    @property
    def account_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/{ACCOUNT}"

    def start(self) -> None:
        if not BIN.exists():
            unavailable("Azurite is not installed (tools/test_servers_install.sh, needs npm)")
            return
        self._dir = tempfile.TemporaryDirectory(prefix="azurite-")
        self._proc = subprocess.Popen(
            [
                str(BIN),
                *("--blobHost", "127.0.0.1", "--blobPort", str(self.port)),
                # Azurite refuses --location with --inMemoryPersistence; it runs in a temporary
                # folder so that nothing it might write lands in the repository.
                *("--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck", "--silent"),
                # azure-storage-blob 12.7.0 (pinned by botbuilder-azure 4.17.1) sends
                # x-ms-encryption-algorithm: AES256 on every upload, with no customer key. Azure ignores
                # it; Azurite's strict mode refuses it (Azure/Azurite#676): --loose is its remedy.
                "--loose",
                *(
                    ("--cert", str(self.tls[0]), "--key", str(self.tls[1]), "--oauth", "basic")
                    if self.tls
                    else ()
                ),
            ],
            cwd=self._dir.name,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._listening():
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                self.stop()
                raise RuntimeError(f"azurite-blob exited: {err[-500:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"azurite-blob did not listen on port {self.port}")
            time.sleep(0.1)

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            if proc.stderr is not None:
                proc.stderr.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


@contextmanager
def running_azurite() -> Iterator[AzuriteBlob]:
    """A started Blob service, stopped on exit (a test module wraps it in its own fixture)."""
    server = AzuriteBlob()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def azurite() -> Iterator[AzuriteBlob]:
    """One Azurite for a test module (its tests make containers of their own)."""
    with running_azurite() as server:
        yield server
