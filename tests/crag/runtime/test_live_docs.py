"""Live documents: the bot watches CRAG_DOCS_DIR and re-indexes added, changed and removed files while
it serves, without a restart and without serving a cached answer from the old documents; each
documents folder gets its own index folder unless CRAG_INDEX_DIR names one.

In-process over a temporary folder (lexical only, so the rebuilds take well under a second); every
wait polls with a generous deadline instead of assuming how fast the file system reports a change.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from crag.cli.ingest import main as ingest_main
from crag.config.engine_settings import CragSettings, default_index_dir
from crag.core.models import CragResult
from crag.ingest import local_target
from crag.runtime import handle as handle_module
from crag.runtime.handle import EngineHandle

DEADLINE_S = 30.0

DOCS = {
    "remote_work.md": """# Remote work policy

## Home-office allowance

Employees who work from home receive a monthly home-office allowance of 3,000 yen.
""",
    "canteen.md": """# Canteen

## Opening hours

The canteen on the 3rd floor opens at 11:30 and closes at 14:00 on weekdays.
""",
}
PARKING = """# Visitor parking

## Where visitors park

Visitors park in bay B of the north garage; the reception desk hands out the parking ticket.
"""
ALLOWANCE_Q = "How much is the monthly home-office allowance?"
CANTEEN_Q = "When does the canteen open?"
PARKING_Q = "Where do visitors park?"


def settings_for(root: Path, **env: str) -> CragSettings:
    return CragSettings(
        CRAG_DOCS_DIR=str(root / "docs"), CRAG_INDEX_DIR=str(root / "index"), CRAG_EMBEDDINGS="off", **env
    )


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[EngineHandle, Path]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    handle = EngineHandle(settings_for(tmp_path))
    await handle.open()
    try:
        # Changes made before the watch is on would be caught up too, but the tests mean to exercise
        # the watch itself.
        await asyncio.wait_for(handle.watching.wait(), DEADLINE_S)
        yield handle, docs
    finally:
        await handle.close()


async def ask(handle: EngineHandle, question: str) -> CragResult:
    assert handle.engine is not None
    return await handle.engine.run(question)


async def eventually(handle: EngineHandle, question: str, ok: Callable[[CragResult], bool]) -> CragResult:
    """Ask until the answer satisfies `ok` (the watcher re-indexes in the background)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while True:
        result = await ask(handle, question)
        if ok(result):
            return result
        assert loop.time() < deadline, f"not answered as expected in time: {result.answer!r}"
        await asyncio.sleep(0.2)


async def until(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def test_an_added_file_is_answered_from_without_a_restart(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    before = await ask(handle, PARKING_Q)  # cached if it can be: the new file must win over it
    assert "parking.md" not in before.cited_files
    (docs / "parking.md").write_text(PARKING, "utf-8")
    result = await eventually(handle, PARKING_Q, lambda r: "parking.md" in r.cited_files)
    assert "bay B" in result.answer
    _, health = handle.status()
    assert health["documents"] == 3
    watch = health["watch"]
    assert isinstance(watch, dict) and watch["enabled"] and watch["rebuilds"] >= 1
    assert "+1 " in str(watch["last_change"])
    assert health["indexed_at"]
    assert "parking.md" in handle.index.files  # /docs/ may serve it now


async def test_a_changed_fact_is_answered_not_the_cached_old_one(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    old = await ask(handle, ALLOWANCE_Q)
    assert "3,000" in old.answer
    again = await ask(handle, ALLOWANCE_Q)
    assert again.timings_ms.get("cache") == 0.0  # the old answer is in the cache
    (docs / "remote_work.md").write_text(DOCS["remote_work.md"].replace("3,000", "5,000"), "utf-8")
    result = await eventually(handle, ALLOWANCE_Q, lambda r: "5,000" in r.answer)
    assert "3,000" not in result.answer
    assert "remote_work.md" in result.cited_files
    assert handle.watch.last_change.startswith("+0 ~1 -0 files")


async def test_a_removed_file_is_no_longer_cited(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    assert "canteen.md" in (await ask(handle, CANTEEN_Q)).cited_files
    (docs / "canteen.md").unlink()
    await eventually(handle, CANTEEN_Q, lambda r: "canteen.md" not in r.cited_files)
    assert "canteen.md" not in handle.index.files
    assert handle.index.documents == 1
    assert handle.watch.last_change.startswith("+0 ~0 -1 files")


async def test_a_burst_of_files_is_indexed_in_few_rebuilds(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    folder = docs / "handbook"
    staging = docs.parent / "staging"
    staging.mkdir()
    for i in range(20):
        (staging / f"room_{i}.md").write_text(f"# Room {i}\n\nMeeting room {i} seats {i + 4} people.\n")
    shutil.copytree(staging, folder)  # a folder copied in: twenty files at once
    await until(lambda: handle.index.documents == 22)
    # Grouped, not one rebuild per file (how many groups depends on the system's timing).
    assert handle.watch.rebuilds < 20
    result = await ask(handle, "How many people does meeting room 7 seat?")
    assert "handbook/room_7.md" in result.cited_files


async def test_a_broken_file_is_skipped_and_the_index_keeps_serving(
    live: tuple[EngineHandle, Path],
) -> None:
    handle, docs = live
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a PDF")
    await until(lambda: handle.status()[1].get("skipped_documents") == 1)
    assert any("broken.pdf" in reason for reason in handle.index.skipped)
    assert handle.index.documents == 2
    assert "3,000" in (await ask(handle, ALLOWANCE_Q)).answer
    (docs / "parking.md").write_text(PARKING, "utf-8")  # the broken file does not block later changes
    await eventually(handle, PARKING_Q, lambda r: "parking.md" in r.cited_files)
    assert handle.status()[1]["skipped_documents"] == 1


async def test_a_failed_rebuild_keeps_the_old_index_then_recovers(
    live: tuple[EngineHandle, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle, docs = live
    rebuild = handle_module.open_local_index
    calls: list[int] = []

    def failing(*args: object) -> object:
        calls.append(1)
        raise OSError("disk full")

    monkeypatch.setattr(handle_module, "open_local_index", failing)
    engine = handle.engine
    (docs / "parking.md").write_text(PARKING, "utf-8")
    await until(lambda: bool(calls))
    await until(lambda: "re-indexing failed" in str(handle.watch_status().get("error", "")))
    assert handle.engine is engine  # still the old index, still answering
    assert "3,000" in (await ask(handle, ALLOWANCE_Q)).answer
    assert handle.watch_task is not None and not handle.watch_task.done()  # still watching

    monkeypatch.setattr(handle_module, "open_local_index", rebuild)
    (docs / "parking.md").write_text(PARKING + "\nThe garage closes at 22:00.\n", "utf-8")
    await eventually(handle, PARKING_Q, lambda r: "parking.md" in r.cited_files)
    assert "error" not in handle.watch_status()


async def test_two_instances_serving_one_folder_both_follow_it(live: tuple[EngineHandle, Path]) -> None:
    first, docs = live
    second = EngineHandle(first.settings)
    try:
        await second.open()
        await asyncio.wait_for(second.watching.wait(), DEADLINE_S)
        for i in range(3):  # both rebuild the one index folder at about the same moment
            (docs / f"parking_{i}.md").write_text(PARKING.replace("bay B", f"bay {i}"), "utf-8")
            name = f"parking_{i}.md"
            await until(lambda name=name: name in first.index.files and name in second.index.files)
        for handle in (first, second):
            assert handle.index.documents == 5
            result = await ask(handle, PARKING_Q)
            assert any(f.startswith("parking_") for f in result.cited_files)
    finally:
        await second.close()


async def test_close_stops_the_watcher_and_the_replaced_engines(live: tuple[EngineHandle, Path]) -> None:
    handle, docs = live
    (docs / "parking.md").write_text(PARKING, "utf-8")
    await until(lambda: handle.watch.rebuilds == 1)
    assert len(handle._retiring) == 1  # the replaced engine waits for turns still on it
    task = handle.watch_task
    assert task is not None and not task.done()
    await handle.close()
    assert task.done() and not handle._retiring
    assert handle.watch_status()["enabled"] is False
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []


async def test_changes_made_while_the_index_opened_are_caught_up(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "canteen.md").write_text(DOCS["canteen.md"], "utf-8")
    handle = EngineHandle(settings_for(tmp_path))
    try:
        await handle.open()
        # After the index was read, before the watch is on: no event will ever report this file.
        (docs / "parking.md").write_text(PARKING, "utf-8")
        await asyncio.wait_for(handle.watching.wait(), DEADLINE_S)
        assert "parking.md" in handle.index.files
    finally:
        await handle.close()


async def test_no_watcher_when_turned_off(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "canteen.md").write_text(DOCS["canteen.md"], "utf-8")
    handle = EngineHandle(settings_for(tmp_path, CRAG_WATCH_DOCS="false"))
    try:
        await handle.open()
        assert handle.watch_task is None
        assert handle.status()[1]["watch"] == {"enabled": False, "rebuilds": 0}
    finally:
        await handle.close()


def test_a_file_gone_while_hashed_is_left_out_and_one_that_cannot_be_read_is_marked(tmp_path: Path) -> None:
    # Running as root, a mode-000 file stays readable: a folder stands in for an unreadable file.
    assert local_target._file_hash(tmp_path / "vanished.md") is None
    assert local_target._file_hash(tmp_path) == local_target.UNREADABLE


# -- the index folder -------------------------------------------------------------------------------


def test_two_documents_folders_get_two_index_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "docs", tmp_path / "b" / "docs"
    first = CragSettings(CRAG_DOCS_DIR=str(a))
    second = CragSettings(CRAG_DOCS_DIR=str(b))
    assert first.index_dir != second.index_dir
    assert first.index_dir.parent == second.index_dir.parent  # both under data/indexes/
    assert first.index_dir.name.startswith("docs-")
    assert first.index_dir == default_index_dir(a)


def test_the_same_folder_gets_the_same_index_folder_however_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    relative = CragSettings(CRAG_DOCS_DIR="docs")
    absolute = CragSettings(CRAG_DOCS_DIR=str(tmp_path / "docs"))
    assert relative.index_dir == absolute.index_dir


def test_an_explicit_index_folder_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert CragSettings(CRAG_DOCS_DIR=str(tmp_path), CRAG_INDEX_DIR=str(tmp_path / "i")).index_dir == (
        tmp_path / "i"
    )
    monkeypatch.setenv("CRAG_INDEX_DIR", str(tmp_path / "from-env"))
    settings = CragSettings(CRAG_DOCS_DIR=str(tmp_path))
    assert settings.index_dir == tmp_path / "from-env"
    assert settings.for_docs(tmp_path / "other").index_dir == tmp_path / "from-env"


def test_for_docs_derives_the_folder_the_bot_would_use(tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert CragSettings().for_docs(other).index_dir == CragSettings(CRAG_DOCS_DIR=str(other)).index_dir
    assert CragSettings().for_docs(other, tmp_path / "x").index_dir == tmp_path / "x"


def test_the_ingest_cli_builds_where_the_bot_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "canteen.md").write_text(DOCS["canteen.md"], "utf-8")
    monkeypatch.delenv("CRAG_INDEX_DIR", raising=False)
    monkeypatch.setenv("CRAG_EMBEDDINGS", "off")
    # The derived folder lives under the repository's data/indexes/: point the derivation at tmp.
    monkeypatch.setattr("crag.config.engine_settings.REPO_ROOT", tmp_path)
    assert ingest_main([str(docs)]) == 0
    expected = CragSettings(CRAG_DOCS_DIR=str(docs)).index_dir
    assert expected.parent == tmp_path / "data" / "indexes"
    assert (expected / "manifest.json").is_file()
    assert str(expected) in capsys.readouterr().out
