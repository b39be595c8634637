"""The access file while the bot serves: an edit re-applies within seconds without a restart (a
revoked group loses access, and no cached answer outlives it), a broken file is refused with a clear
message at start, at ingest and while watching, never silently read as "allow all".

In-process over a temporary folder, lexical only (rebuilds take well under a second); waits poll
with a generous deadline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from crag.access.membership import LocalMembership, reader_for
from crag.cli.ingest import main as ingest_main
from crag.config.engine_settings import CragSettings
from crag.core.access import Reader, reader_of
from crag.core.models import CragResult
from crag.ingest import local_target
from crag.runtime.handle import EngineHandle
from tests.crag.runtime.test_live_docs import until

DEADLINE_S = 30.0
USER_B = "bbbbbbbb-0000-4000-8000-00000000000b"
DOCS = {
    "handbook.md": "# Employee handbook\n\n## Office hours\n\nThe office is open from 8:00 to 19:00.\n",
    "hr/salary_bands.md": (
        "# Salary bands\n\n## Engineering salary bands\n\n"
        "The engineering salary band for grade 5 is 9,400,000 yen per year.\n"
    ),
}
RULES = """
[[rule]]
files = "**"
allow = ["*"]

[[rule]]
files = "hr/"
allow = [{hr}]

[groups]
group-b = ["{user}"]
"""
SALARY_Q = "What is the engineering salary band for grade 5?"


def access(*hr: str) -> str:
    return RULES.format(hr=", ".join(f'"{g}"' for g in hr), user=USER_B)


def make_docs(root: Path, rules: str | None) -> Path:
    docs = root / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, "utf-8")
    if rules is not None:
        (docs / ".access.toml").write_text(rules, "utf-8")
    return docs


def settings_for(root: Path, **env: object) -> CragSettings:
    values: dict[str, object] = {
        "CRAG_DOCS_DIR": str(root / "docs"),
        "CRAG_INDEX_DIR": str(root / "index"),
        "CRAG_EMBEDDINGS": "off",
        "CRAG_ACCESS_TRIMMING": True,
        "SERPAPI_API_KEY": "",
        "OPENAI_API_KEY": "",
        "AZURE_OPENAI_ENDPOINT": "",
        "AZURE_SEARCH_ENDPOINT": "",
        **env,
    }
    return CragSettings(**values)  # type: ignore[arg-type]


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[EngineHandle, Path]]:
    docs = make_docs(tmp_path, access("group-b"))
    handle = EngineHandle(settings_for(tmp_path))
    await handle.open()
    try:
        assert handle.engine is not None, handle.error
        await asyncio.wait_for(handle.watching.wait(), DEADLINE_S)
        yield handle, docs
    finally:
        await handle.close()


async def reader_b(handle: EngineHandle) -> Reader:
    return await reader_for(USER_B, LocalMembership(handle.settings.access_path))


async def eventually(
    handle: EngineHandle, reader: Reader, ok: Callable[[CragResult], bool], question: str = SALARY_Q
) -> CragResult:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while True:
        assert handle.engine is not None
        result = await handle.engine.run(question, reader=reader)
        if ok(result):
            return result
        assert loop.time() < deadline, f"not answered as expected in time: {result.answer!r}"
        await asyncio.sleep(0.2)


def has_secret(result: CragResult) -> bool:
    return "9,400,000" in result.model_dump_json()


async def test_revoking_a_group_takes_effect_without_a_restart(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    reader = await reader_b(handle)
    assert has_secret(await handle.engine.run(SALARY_Q, reader=reader))  # type: ignore[union-attr]
    again = await handle.engine.run(SALARY_Q, reader=reader)  # type: ignore[union-attr]
    assert again.timings_ms.get("cache") == 0.0  # B's answer is in the cache
    loop = asyncio.get_running_loop()
    revoked_at = loop.time()
    (docs / ".access.toml").write_text(access("hr-only-now"), "utf-8")  # group-b removed
    result = await eventually(handle, reader, lambda r: not has_secret(r))
    took = loop.time() - revoked_at
    assert result.timings_ms.get("cache") is None  # answered afresh, not the cached answer
    # The rebuild re-applied the rules without reading or tokenizing a document again.
    assert handle.report is not None and handle.report.reused == 2 and handle.report.bytes == 0
    print(f"revocation effective after {took:.1f}s")
    assert handle.index.readers["hr/salary_bands.md"] == ("hr-only-now",)
    # Granting again works the same way (and the hidden access file is never a document).
    (docs / ".access.toml").write_text(access("group-b"), "utf-8")
    await eventually(handle, reader, has_secret)
    assert ".access.toml" not in handle.index.files


async def test_a_broken_edit_keeps_the_previous_rules_and_says_why(
    live: tuple[EngineHandle, Path], caplog: pytest.LogCaptureFixture
) -> None:
    handle, docs = live
    engine = handle.engine
    membership = LocalMembership(handle.settings.access_path)  # one for the app's life, as the bot's
    assert "group-b" in await reader_for(USER_B, membership)
    with caplog.at_level(logging.WARNING):
        (docs / ".access.toml").write_text(access("group-b") + "\n[[rule]]\nfiles = 'x'\n", "utf-8")
        await until(lambda: "allow: Field required" in str(handle.watch_status().get("error", "")))
    assert handle.engine is engine  # the previous index and rules keep serving, groups too
    reader = await reader_for(USER_B, membership)
    assert has_secret(await handle.engine.run(SALARY_Q, reader=reader))  # type: ignore[union-attr]
    assert not has_secret(await handle.engine.run(SALARY_Q, reader=reader_of(None)))  # type: ignore[union-attr]
    lines = [r for r in caplog.records if "re-indexing" in r.getMessage()]
    assert lines and "rule 3: allow: Field required" in lines[0].getMessage()
    assert not any(r.exc_info for r in lines)  # a message, not a traceback
    (docs / ".access.toml").write_text(access("somebody-else"), "utf-8")  # fixed: applies
    await eventually(handle, await reader_b(handle), lambda r: not has_secret(r))
    assert "error" not in handle.watch_status()


BROKEN = '[[rule]]\nfiles = "**"\nallow = ["every one"]\n'


async def test_a_broken_file_at_start_is_a_clear_error_not_an_open_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_docs(tmp_path, BROKEN)
    handle = EngineHandle(settings_for(tmp_path))
    with caplog.at_level(logging.ERROR):
        await handle.open()
    try:
        assert handle.engine is None and handle.local_index is None
        assert "access file" in handle.error and "'every one' is not a principal" in handle.error
        status, body = handle.status()
        assert status == 503 and body["detail"] == handle.error
        assert next(r for r in caplog.records if "cannot start" in r.getMessage()).exc_info is None
    finally:
        await handle.close()


def test_ingest_refuses_a_broken_access_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ingest command says what is wrong and fails, for the local index and for Azure AI
    Search (before it contacts the service: nothing is uploaded without the rules)."""
    make_docs(tmp_path, BROKEN)
    assert ingest_main([str(tmp_path / "docs"), "--index-dir", str(tmp_path / "index")]) == 1
    assert "'every one' is not a principal" in capsys.readouterr().err
    env = {"AZURE_SEARCH_ENDPOINT": "http://127.0.0.1:9", "AZURE_SEARCH_API_KEY": "k"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        assert ingest_main([str(tmp_path / "docs"), "--target", "azure"]) == 2
    assert "'every one' is not a principal" in capsys.readouterr().err


async def test_a_configured_access_file_must_exist_and_is_watched_where_it_is(tmp_path: Path) -> None:
    make_docs(tmp_path, None)
    outside = tmp_path / "policy" / "access.toml"
    missing = EngineHandle(settings_for(tmp_path, CRAG_ACCESS_FILE=str(outside)))
    await missing.open()
    assert missing.engine is None and "not found (CRAG_ACCESS_FILE)" in missing.error
    await missing.close()
    outside.parent.mkdir()
    outside.write_text(access("group-b"), "utf-8")
    handle = EngineHandle(settings_for(tmp_path, CRAG_ACCESS_FILE=str(outside)))
    await handle.open()
    try:
        await asyncio.wait_for(handle.watching.wait(), DEADLINE_S)
        reader = await reader_for(USER_B, LocalMembership(outside))
        assert has_secret(await handle.engine.run(SALARY_Q, reader=reader))  # type: ignore[union-attr]
        (outside.parent / "notes.md").write_text("unrelated", "utf-8")  # its folder's other files: no rebuild
        outside.write_text(access("someone-else"), "utf-8")
        await eventually(handle, reader, lambda r: not has_secret(r))
        assert handle.watch.rebuilds == 1
    finally:
        await handle.close()


def test_a_folder_without_an_access_file_keeps_its_fingerprint(tmp_path: Path) -> None:
    """Nothing changes for an existing deployment: without an access file the fingerprint (so the
    index version, the answer cache keys and the stored index) is what it was before trimming."""
    docs = make_docs(tmp_path, None)
    source = local_target.AccessSource(docs / ".access.toml")
    with_source = local_target._fingerprint(docs, 1200, "", 1000, access=source)
    assert with_source == local_target._fingerprint(docs, 1200, "", 1000)
    assert "access" not in with_source
    (docs / ".access.toml").write_text(access("group-b"), "utf-8")
    assert "access" in local_target._fingerprint(docs, 1200, "", 1000, access=source)
