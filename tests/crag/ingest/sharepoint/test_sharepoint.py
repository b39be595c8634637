"""SharePoint through Microsoft Graph (#17): the real msgraph-sdk and azure-identity against the fake
Graph and its TLS authority on 127.0.0.1 (tests/fakes/graph.py).

Delta syncs add, change, move and remove documents in the local index in place; pages are followed;
throttling is waited out as Retry-After says; permissions become each chunk's readers; a user's
groups are read page by page; the bot syncs on a schedule without holding up turns, and a changed
library is never answered from the answer cache of the old one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from crag.config.engine_settings import CragSettings
from crag.core.access import EVERYONE
from crag.core.models import Chunk
from crag.ingest.sharepoint.local import stored_state, sync_to_local
from crag.ingest.sharepoint.schedule import SharePointSource
from crag.providers.graph.client import GraphError
from crag.providers.graph.user_groups import GraphMembership
from crag.retrieval.search.local_index import LocalIndex
from crag.runtime import handle as handle_module
from crag.runtime.handle import EngineHandle
from tests.fakes.graph import FakeGraph
from tests.fakes.graph_fixtures import ALICE, GROUP_A, GROUP_B, Graph

LEAVE = "# Leave policy\n\n## Annual leave\n\nEmployees receive 20 days of annual leave each year.\n"
PAY = "# Payroll\n\n## Pay day\n\nSalaries are paid on the 25th of each month.\n"
CANTEEN = "# Canteen\n\n## Opening hours\n\nThe canteen opens at 11:30 on weekdays.\n"
PARKING = "# Parking\n\n## Visitors\n\nVisitors park in bay B of the north garage.\n"
DEADLINE_S = 30.0


def find(index: LocalIndex, text: str) -> list[Chunk]:
    """The chunks a search for `text` ranks (lexical: the tests run without embeddings)."""
    return [hit.chunk for hit in index.search_terms(index.terms(text), 5)]


def files_found(index: LocalIndex, text: str) -> set[str]:
    return {chunk.file for chunk in find(index, text)}


def library(graph: Graph) -> FakeGraph:
    fake = graph.fake
    fake.put_file(graph.drive, "HR/leave.md", LEAVE.encode())
    fake.put_file(graph.drive, "HR/pay.md", PAY.encode())
    fake.put_file(graph.drive, "Facilities/canteen.md", CANTEEN.encode())
    fake.put_file(graph.drive, "Facilities/archive.zip", b"PK\x03\x04")  # not a document: left out
    fake.share(graph.drive, "HR", [{"roles": ["read"], "grantedToV2": {"group": {"id": GROUP_A}}}])
    fake.share(
        graph.drive, "Facilities", [{"roles": ["read"], "link": {"scope": "organization", "type": "view"}}]
    )
    return fake


async def test_delta_sync_adds_changes_moves_and_removes_documents_in_place(
    graph: Graph, tmp_path: Path
) -> None:
    fake = library(graph)
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        first = await sync_to_local(settings, client)
        assert first.index is not None
        assert sorted(first.result.files) == ["Facilities/canteen.md", "HR/leave.md", "HR/pay.md"]
        assert first.result.report.full and first.result.report.downloaded == 3
        # 7 items (root, 2 folders, 4 files) in pages of 3: the next links were followed.
        delta = fake.graph_calls("/delta()")
        assert [r.path.count("cursor=") for r in delta] == [0, 1, 1]
        assert all("deltashowremovedasdeleted" in r.prefer for r in delta)
        hits = find(first.index, "annual leave days")
        assert hits[0].file == "HR/leave.md"
        assert hits[0].url == "https://contoso.sharepoint.com/sites/hr/Shared%20Documents/HR/leave.md"
        assert "HR/pay.md" in files_found(first.index, "salaries paid")
        link = stored_state(settings.index_dir).delta_link  # type: ignore[union-attr]
        assert "token=" in link

        fake.put_file(graph.drive, "HR/pay.md", PAY.replace("25th", "20th").encode())  # changed
        fake.put_file(graph.drive, "Facilities/parking.md", PARKING.encode())  # added
        fake.delete(graph.drive, "Facilities/canteen.md")  # removed
        fake.move(graph.drive, "HR", "People")  # a folder renamed: its files are not in the feed
        downloads_before = len(fake.graph_calls("/content"))
        deltas_before = len(fake.graph_calls("/delta()"))
        second = await sync_to_local(settings, client)
        assert second.index is not None
        # Asked from the stored delta link.
        assert fake.graph_calls("/delta()")[deltas_before].path.endswith(link.rsplit("/", 1)[-1])
        report = second.result.report
        assert not report.full
        assert report.removed == ["Facilities/canteen.md", "HR/leave.md", "HR/pay.md"]
        assert report.added == ["Facilities/parking.md", "People/leave.md", "People/pay.md"]
        # Only what changed was downloaded again (the moved files: their webUrl is in their key).
        assert len(fake.graph_calls("/content")) - downloads_before == 3
        index = second.index
        assert files_found(index, "canteen opens weekdays") == set()
        assert "Facilities/parking.md" in files_found(index, "visitors park garage")
        pay = [c for c in find(index, "salaries paid month") if c.file == "People/pay.md"]
        assert pay and "20th" in pay[0].text and "25th" not in pay[0].text
        assert pay[0].url == "https://contoso.sharepoint.com/sites/hr/Shared%20Documents/People/pay.md"
        assert {c.file for c in index.chunks} == {"Facilities/parking.md", "People/leave.md", "People/pay.md"}
        # Reloaded from disk, the index is what the sync built (the bot loads this one).
        assert {c.url for c in LocalIndex.load(settings.index_dir).chunks} == {c.url for c in index.chunks}

        third = await sync_to_local(settings, client)
        assert third.index is None and not third.result.changed  # nothing changed: nothing rebuilt
        assert stored_state(settings.index_dir).delta_link != link  # type: ignore[union-attr]


async def test_permissions_become_each_chunks_readers(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    fake.put_file(graph.drive, "HR/secret/salaries.md", b"# Salaries\n\nThe CEO earns a lot.\n")
    # Inheritance broken: only group B and one user, plus a SharePoint site group.
    fake.share(
        graph.drive,
        "HR/secret",
        [
            {"roles": ["read"], "grantedToV2": {"group": {"id": GROUP_B.upper()}}},
            {"roles": ["write"], "grantedToV2": {"user": {"id": ALICE, "displayName": "Alice"}}},
            {"roles": ["read"], "grantedToV2": {"siteGroup": {"id": "5", "displayName": "HR Owners"}}},
            {"roles": ["read"], "grantedToV2": {"siteGroup": {"id": "6", "displayName": "HR Visitors"}}},
            {"roles": ["read"], "grantedToV2": {"user": {"displayName": "guest@example.com"}}},
        ],
        inherit=False,
    )
    fake.put_file(graph.drive, "links/shared.md", b"# Shared\n\nA file shared by links.\n")
    fake.share(
        graph.drive,
        "links/shared.md",
        [
            {
                "roles": ["read"],
                "link": {"scope": "users"},
                "grantedToIdentitiesV2": [{"group": {"id": GROUP_B}}],
            },
            {"roles": ["read"], "link": {"scope": "existingAccess"}},
            {"roles": ["read"], "link": {"scope": "anonymous"}, "expirationDateTime": "2020-01-01T00:00:00Z"},
        ],
    )
    owners = "0wn3r500-0000-0000-0000-000000000005".replace("0wn3r500", "00000500")
    settings = graph.settings(tmp_path, CRAG_SHAREPOINT_SITE_GROUPS=f'{{"HR Owners": ["{owners}"]}}')
    async with graph.client(settings) as client:
        synced = await sync_to_local(settings, client)
    assert synced.index is not None
    readers = {c.file: c.allowed for c in synced.index.chunks}
    assert readers["HR/leave.md"] == (GROUP_A,)  # inherited from the folder
    assert readers["Facilities/canteen.md"] == (EVERYONE,)  # an organization-wide link
    assert readers["HR/secret/salaries.md"] == tuple(sorted([GROUP_B, ALICE, owners]))  # normalized
    assert readers["links/shared.md"] == (GROUP_B,)  # expired and existing-access links give nothing
    unmapped = synced.result.report.unmapped
    assert unmapped == {
        "SharePoint site group 'HR Visitors'": 1,
        "user 'guest@example.com' without an Entra object id": 1,
    }


async def test_a_folder_shared_anew_changes_its_files_readers(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        await sync_to_local(settings, client)
        fake.share(graph.drive, "HR", [{"roles": ["read"], "grantedToV2": {"group": {"id": GROUP_B}}}])
        synced = await sync_to_local(settings, client)
    assert synced.index is not None
    assert {c.file: c.allowed for c in synced.index.chunks}["HR/pay.md"] == (GROUP_B,)
    assert synced.result.report.changed == ["HR/leave.md", "HR/pay.md"]


async def test_a_throttled_request_is_retried_after_retry_after(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    fake.throttle(times=1, retry_after=1, match="permissions")
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        synced = await sync_to_local(settings, client)
    assert synced.index is not None and len(synced.result.files) == 3
    calls = fake.graph_calls("/permissions")
    throttled = [i for i, r in enumerate(calls) if r.status == 429]
    assert len(throttled) == 1
    retry = next(r for r in calls[throttled[0] + 1 :] if r.path == calls[throttled[0]].path)
    assert retry.status == 200
    assert retry.at - calls[throttled[0]].at >= 1.0  # the SDK's retry handler waited Retry-After


async def test_throttling_longer_than_the_sdk_waits_fails_with_the_wait(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    fake.throttle(times=1, retry_after=600, match="delta")  # over the SDK's 180 s: it does not wait
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        started = time.monotonic()
        with pytest.raises(GraphError) as caught:
            await sync_to_local(settings, client)
    assert time.monotonic() - started < 10
    assert caught.value.kind == "throttled" and caught.value.retry_after == 600
    assert len(fake.graph_calls("/delta()")) == 1
    assert stored_state(settings.index_dir) is None  # nothing half-done was stored


async def test_an_expired_delta_link_starts_a_full_enumeration(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        await sync_to_local(settings, client)
        fake.delete(graph.drive, "HR/leave.md")
        fake.expire_delta_links()
        synced = await sync_to_local(settings, client)
    assert [r.status for r in fake.graph_calls("/delta()")][-3:] == [410, 200, 200]
    assert synced.result.report.full and synced.result.report.removed == ["HR/leave.md"]
    assert synced.index is not None and "HR/leave.md" not in {c.file for c in synced.index.chunks}


async def test_only_the_configured_folder_is_indexed(graph: Graph, tmp_path: Path) -> None:
    fake = library(graph)
    settings = graph.settings(tmp_path, CRAG_SHAREPOINT_FOLDER="HR")
    async with graph.client(settings) as client:
        first = await sync_to_local(settings, client)
        fake.move(graph.drive, "HR/pay.md", "Facilities/pay.md")  # moved out of the folder
        second = await sync_to_local(settings, client)
    assert sorted(first.result.files) == ["HR/leave.md", "HR/pay.md"]
    assert second.result.report.removed == ["HR/pay.md"] and second.result.report.added == []


async def test_transitive_member_of_is_read_page_by_page_groups_only(graph: Graph, tmp_path: Path) -> None:
    fake = graph.fake
    groups = [f"{i:08d}-0000-0000-0000-00000000000{i}".upper() for i in range(1, 6)]
    fake.groups[ALICE] = groups
    fake.roles[ALICE] = ["62e90394-69f5-4237-9190-012177145e10"]  # a directory role: not a group
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        membership = GraphMembership(client, page_size=2)
        found = await membership.groups_of(ALICE)
        unknown = await membership.groups_of("00000000-0000-0000-0000-000000000099")
    assert found == tuple(sorted(g.lower() for g in groups))
    assert unknown == ()
    pages = fake.graph_calls("transitiveMemberOf")
    assert len(pages) == 4  # 3 pages for Alice (2 + 2 + 1), 1 for the unknown user
    assert pages[0].path.startswith(f"users/{ALICE}/transitiveMemberOf/graph.group")
    assert "$select=id" in pages[0].path


async def test_a_graph_failure_is_a_graph_error_with_a_safe_message(graph: Graph, tmp_path: Path) -> None:
    settings = graph.settings(tmp_path)
    async with graph.client(settings) as client:
        graph.fake.reject_tokens = True
        with pytest.raises(GraphError) as rejected:
            await GraphMembership(client).groups_of(ALICE)
    assert rejected.value.kind == "auth" and "HTTP 401 InvalidAuthenticationToken" in str(rejected.value)
    assert graph.fake.client_secret not in str(rejected.value)


async def test_the_bot_syncs_on_a_schedule_and_never_answers_from_the_old_library(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = library(graph)
    settings = graph.settings(tmp_path, CRAG_SHAREPOINT_SYNC_MINUTES=0.01)  # every 0.6 s
    monkeypatch.setattr(
        handle_module,
        "_sharepoint_source",
        lambda s: SharePointSource(s, connection_verify=str(graph.ca_file)),
    )
    handle = EngineHandle(settings)
    await handle.open()
    try:
        assert handle.engine is not None and not handle.error
        question = "When are salaries paid?"
        first = await handle.engine.run(question)
        assert "25th" in first.answer
        cited = [c for c in first.citations if c.kind == "document"]
        assert cited and cited[0].url.endswith("/Shared%20Documents/HR/pay.md")
        assert (await handle.engine.run(question)).timings_ms.get("cache") == 0.0  # now cached
        fake.put_file(graph.drive, "HR/pay.md", PAY.replace("25th", "20th").encode())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while True:
            assert handle.engine is not None
            answer = await handle.engine.run(question)
            if "20th" in answer.answer:
                break
            assert loop.time() < deadline, f"the change was not synced: {answer.answer!r}"
            await asyncio.sleep(0.2)
        assert "25th" not in answer.answer
        watch = handle.watch_status()
        assert watch["enabled"] and int(str(watch["rebuilds"])) >= 1
        assert "~1" in str(watch["last_change"])
    finally:
        await handle.close()


async def test_a_sync_in_flight_does_not_hold_up_turns(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library(graph)
    settings = graph.settings(tmp_path)
    monkeypatch.setattr(
        handle_module,
        "_sharepoint_source",
        lambda s: SharePointSource(s, connection_verify=str(graph.ca_file)),
    )
    handle = EngineHandle(settings)
    await handle.open()
    try:
        assert handle.engine is not None
        graph.fake.delay_s = 1.0  # every Graph call of the next sync takes a second
        sync = asyncio.create_task(handle.sync_sharepoint())
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await handle.engine.run("When does the canteen open?")
        assert time.monotonic() - started < 1.0
        assert not sync.done()
        assert await sync is None
    finally:
        await handle.close()


async def test_the_first_sync_failing_leaves_the_bot_unready_with_the_reason(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = graph.settings(tmp_path, CRAG_SHAREPOINT_SITE="https://contoso.sharepoint.com/sites/nope")
    monkeypatch.setattr(
        handle_module,
        "_sharepoint_source",
        lambda s: SharePointSource(s, connection_verify=str(graph.ca_file)),
    )
    handle = EngineHandle(settings)
    await handle.open()
    try:
        status, body = handle.status()
        assert status == 503
        assert "site 'contoso.sharepoint.com:/sites/nope' not found" in str(body["detail"])
    finally:
        await handle.close()


def test_settings_name_what_is_missing_and_refuse_tokens_in_clear_text() -> None:
    with pytest.raises(ValueError, match="needs GRAPH_TENANT_ID, GRAPH_CLIENT_ID, GRAPH_CLIENT_SECRET"):
        CragSettings(CRAG_SOURCE="sharepoint", CRAG_SHAREPOINT_SITE="https://contoso.sharepoint.com/sites/hr")
    with pytest.raises(ValueError, match="GRAPH_BASE_URL must be an https URL"):
        CragSettings(GRAPH_BASE_URL="http://graph.example.com/v1.0")
    with pytest.raises(ValueError, match="lacks the site's name after /sites/"):
        CragSettings(CRAG_SHAREPOINT_SITE="https://contoso.sharepoint.com/sites/", CRAG_SOURCE="sharepoint")
    with pytest.raises(ValueError, match="not a SharePoint site"):
        CragSettings(CRAG_SHAREPOINT_SITE="sites hr", CRAG_SOURCE="sharepoint")


async def test_a_sync_into_azure_ai_search_uploads_changes_and_keeps_its_state(
    graph: Graph, tmp_path: Path
) -> None:
    from crag.ingest.sharepoint.azure import read_state, sync_to_azure
    from tests.fakes.azure_search import FakeAzureSearch

    search = FakeAzureSearch(api_key="admin-key")
    await search.start()
    try:
        fake = library(graph)
        settings = graph.settings(
            tmp_path,
            CRAG_SEARCH="azure",
            AZURE_SEARCH_ENDPOINT=search.url,
            AZURE_SEARCH_API_KEY="admin-key",
            AZURE_SEARCH_INDEX="sp-index",
            AZURE_SEARCH_VECTOR_DIMENSIONS=0,
            CRAG_SHAREPOINT_STATE_DIR=str(tmp_path / "state"),
        )
        async with graph.client(settings) as client:
            first = await sync_to_azure(settings, client)
            docs = search.documents["sp-index"]
            assert {d["file"] for d in docs.values()} == {"Facilities/canteen.md", "HR/leave.md", "HR/pay.md"}
            urls = {d["file"]: d["url"] for d in docs.values()}
            assert urls["HR/pay.md"] == "https://contoso.sharepoint.com/sites/hr/Shared%20Documents/HR/pay.md"
            state = read_state(first.state_path)
            assert state is not None and "token=" in state.delta_link

            fake.delete(graph.drive, "HR/leave.md")
            fake.put_file(graph.drive, "HR/pay.md", PAY.replace("25th", "20th").encode())
            second = await sync_to_azure(settings, client)
            assert second.index.removed_files == ["HR/leave.md"]
            assert second.index.uploaded_files == ["HR/pay.md"]
            docs = search.documents["sp-index"]
            assert {d["file"] for d in docs.values()} == {"Facilities/canteen.md", "HR/pay.md"}
            assert any("20th" in d["content"] for d in docs.values())

            third = await sync_to_azure(settings, client)
            assert third.index.uploaded_files == [] and third.result.report.downloaded == 0
    finally:
        await search.stop()


async def test_changing_the_site_group_mapping_rereads_every_files_readers(
    graph: Graph, tmp_path: Path
) -> None:
    fake = library(graph)
    fake.share(
        graph.drive,
        "Facilities",
        [{"roles": ["read"], "grantedToV2": {"siteGroup": {"displayName": "HR Members"}}}],
    )
    before = graph.settings(tmp_path)
    async with graph.client(before) as client:
        first = await sync_to_local(before, client)
        after = graph.settings(tmp_path, CRAG_SHAREPOINT_SITE_GROUPS=f'{{"hr members": ["{GROUP_B}"]}}')
        second = await sync_to_local(after, client)
    assert first.index is not None and second.index is not None
    assert {c.file: c.allowed for c in first.index.chunks}["Facilities/canteen.md"] == ()
    assert first.result.report.unmapped == {"SharePoint site group 'HR Members'": 1}
    assert {c.file: c.allowed for c in second.index.chunks}["Facilities/canteen.md"] == (GROUP_B,)
    assert second.result.report.permissions_read == 3 and second.result.report.changes == 0


async def test_a_scheduled_sync_into_azure_swaps_the_engine_and_its_cache_version(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.azure_search import FakeAzureSearch

    search = FakeAzureSearch(api_key="admin-key")
    await search.start()
    fake = library(graph)
    settings = graph.settings(
        tmp_path,
        CRAG_SEARCH="azure",
        AZURE_SEARCH_ENDPOINT=search.url,
        AZURE_SEARCH_API_KEY="admin-key",
        AZURE_SEARCH_VECTOR_DIMENSIONS=0,
        CRAG_SHAREPOINT_STATE_DIR=str(tmp_path / "state"),
    )
    monkeypatch.setattr(
        handle_module,
        "_sharepoint_source",
        lambda s: SharePointSource(s, connection_verify=str(graph.ca_file)),
    )
    handle = EngineHandle(settings)
    await handle.open()
    try:
        assert handle.engine is not None and handle.engine.cache is not None
        await handle.sync_sharepoint(remote=True)  # the first sync fills the index
        first = handle.engine
        assert first.cache is not None
        version = handle._remote_version
        assert version and search.documents["crag-chunks"]
        question = "When are salaries paid?"
        await handle.engine.run(question)
        assert (await handle.engine.run(question)).timings_ms.get("cache") == 0.0  # cached
        fake.put_file(graph.drive, "HR/pay.md", PAY.replace("25th", "20th").encode())
        await handle.sync_sharepoint(remote=True)
        assert handle.engine is not first and handle._remote_version != version
        fresh = await handle.engine.run(question)
        assert fresh.timings_ms.get("cache") != 0.0  # the old answer is not served
        assert "20th" in fresh.answer
        await handle.sync_sharepoint(remote=True)  # nothing changed: the same engine goes on
        assert handle._remote_version and handle.watch.last_change.startswith("+0 ~0 -0")
    finally:
        await handle.close()
        await search.stop()
