"""`python -m crag.cli.ingest --source sharepoint`: a sync from the command line against the fake Graph,
and every wrong setting answered with one clear line and an exit code, never a stack trace.

The subprocess runs trust the fake authority's CA through SSL_CERT_FILE (read by OpenSSL when
aiohttp, azure-identity's transport, builds its TLS context); the in-process ones pass it to the
credential.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from crag.cli.sharepoint import run
from tests.crag.ingest.sharepoint.test_sharepoint import library
from tests.fakes.graph_fixtures import SITE_URL, Graph
from tests.paths import ROOT


async def ingest(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("CRAG_", "GRAPH_", "AZURE_", "OPENAI_"))
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "crag.cli.ingest",
        "--source",
        "sharepoint",
        *args,
        cwd=ROOT,
        env={**clean, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_syncs_a_library_into_the_local_index(graph: Graph, tmp_path: Path) -> None:
    library(graph)
    env = graph.env(tmp_path)
    code, out, err = await ingest(env, "--site", SITE_URL)
    assert code == 0, err
    assert "SharePoint: +3 ~0 -0 files" in out
    assert (Path(env["CRAG_INDEX_DIR"]) / "manifest.json").is_file()
    assert "Traceback" not in err
    graph.fake.put_file(graph.drive, "HR/pay.md", b"# Payroll\n\nPaid on the 20th.\n")
    code, out, err = await ingest(env)  # the site from CRAG_SHAREPOINT_SITE this time
    assert code == 0, err
    assert "SharePoint: +0 ~1 -0 files" in out and "1 downloaded" in out


async def test_a_wrong_client_secret_is_one_line_and_exit_2(graph: Graph, tmp_path: Path) -> None:
    env = graph.env(tmp_path, GRAPH_CLIENT_SECRET="not-the-secret")
    code, out, err = await ingest(env)
    assert code == 2
    assert "Entra ID refused the app's credentials" in err and "AADSTS7000215" in err
    assert "not-the-secret" not in err + out
    assert "Traceback" not in err


async def test_missing_graph_settings_are_named(tmp_path: Path) -> None:
    code, _, err = await ingest({"CRAG_INDEX_DIR": str(tmp_path / "i")}, "--site", SITE_URL)
    assert code == 2
    assert "needs GRAPH_TENANT_ID, GRAPH_CLIENT_ID, GRAPH_CLIENT_SECRET" in err
    assert "Traceback" not in err and "errors.pydantic.dev" not in err


@pytest.mark.parametrize(
    ("setup", "extra", "code", "message"),
    [
        (
            None,
            {"CRAG_SHAREPOINT_SITE": "https://contoso.sharepoint.com/sites/nope"},
            2,
            "site 'contoso.sharepoint.com:/sites/nope' not found",
        ),
        (
            None,
            {"CRAG_SHAREPOINT_DRIVE": "Policies"},
            2,
            "library 'Policies' not found in site 'contoso.sharepoint.com:/sites/hr' (it has: 'Documents')",
        ),
        (
            None,
            {"CRAG_SHAREPOINT_FOLDER": "Nowhere/Else"},
            2,
            "folder 'Nowhere/Else' in library 'Documents' not found",
        ),
        ("reject", {}, 2, "Microsoft Graph refused the app's token"),
        ("throttle", {}, 1, "Microsoft Graph is throttling the app while reading the library's changes"),
        ("down", {}, 1, "cannot reach Microsoft Graph"),
    ],
)
async def test_bad_settings_and_failures_give_a_clear_message_and_exit_code(
    graph: Graph,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: str | None,
    extra: dict[str, str],
    code: int,
    message: str,
) -> None:
    library(graph)
    settings = graph.settings(tmp_path, **extra)
    if setup == "reject":
        graph.fake.reject_tokens = True
    elif setup == "throttle":
        graph.fake.throttle(times=1, retry_after=600, match="delta")
    elif setup == "down":
        settings = graph.settings(
            tmp_path, GRAPH_BASE_URL="http://127.0.0.1:9/v1.0", GRAPH_TIMEOUT=2, **extra
        )
    assert await run(settings, "local", connection_verify=str(graph.ca_file)) == code
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    if setup == "throttle":
        assert "try again in 600s" in err
