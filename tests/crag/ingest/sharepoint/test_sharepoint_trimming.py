"""#17 end to end on SharePoint: permissions read through Graph into the index, the asker's groups
read through Graph, and retrieval trimmed to them. A user of group A never receives anything from a
document only group B may read; a member of B does."""

from __future__ import annotations

from pathlib import Path

from crag.access.membership import CachedMembership, reader_for
from crag.core.access import EVERYONE
from crag.ingest.ocr.tesseract import TesseractOcr
from crag.ingest.sharepoint.local import sync_to_local
from crag.retrieval.search.local_index import LocalIndex
from crag.runtime.factory import build_engine, membership_source, ocr_engine
from tests.crag.ingest.scan_images import page_image, png_bytes
from tests.fakes.graph_fixtures import ALICE, GROUP_A, GROUP_B, Graph
from tests.servers.harness import unavailable

BOB = "b0b00000-0000-0000-0000-000000000002"
SALARY = "# 役員報酬規程\n\n## 支給額\n\n執行役員の月額報酬は180万円とし、毎月25日に支給する。\n"
CANTEEN = "# 社員食堂\n\n## 営業時間\n\n社員食堂は11時30分から14時まで営業する。\n"
QUESTION = "執行役員の月額報酬はいくら？"


async def test_a_group_a_user_never_gets_a_group_b_document_through_sharepoint_and_graph(
    graph: Graph, tmp_path: Path
) -> None:
    fake = graph.fake
    fake.put_file(graph.drive, "Board/salary.md", SALARY.encode())
    fake.put_file(graph.drive, "Facilities/canteen.md", CANTEEN.encode())
    fake.share(graph.drive, "Board", [{"roles": ["read"], "grantedToV2": {"group": {"id": GROUP_B}}}])
    fake.share(
        graph.drive, "Facilities", [{"roles": ["read"], "link": {"scope": "organization", "type": "view"}}]
    )
    fake.groups[ALICE] = [GROUP_A]
    fake.groups[BOB] = [GROUP_B]
    settings = graph.settings(tmp_path, CRAG_ACCESS_TRIMMING="true")
    async with graph.client(settings) as client:
        synced = await sync_to_local(settings, client)
    assert synced.index is not None
    salary = [c for c in synced.index.chunks if c.file == "Board/salary.md"]
    assert salary and all(c.allowed == (GROUP_B.lower(),) for c in salary)

    membership = membership_source(settings, connection_verify=str(graph.ca_file))
    assert isinstance(membership, CachedMembership) and membership.name.startswith("graph")
    engine = build_engine(settings, synced.index)
    try:
        alice = await reader_for(ALICE, membership)
        bob = await reader_for(BOB, membership)
        assert alice == frozenset({ALICE, GROUP_A.lower(), EVERYONE})
        # The member of B gets the figure (the control: the question is answerable at all)...
        for_bob = await engine.run(QUESTION, reader=bob)
        assert "180万円" in for_bob.answer and "Board/salary.md" in for_bob.cited_files
        # ...and the member of A gets nothing of it: not in the answer, the passages or the sources,
        # nor from the answer cache that Bob's turn just filled.
        for_alice = await engine.run(QUESTION, reader=alice)
        shown = for_alice.model_dump_json()
        assert "180万円" not in shown and "salary" not in shown and "役員報酬" not in shown
        assert all(g.chunk.file != "Board/salary.md" for g in for_alice.graded)
    finally:
        await engine.close()
        await membership.close()
    # Groups were read once per user through Graph, then from the cache.
    assert len(fake.graph_calls("transitiveMemberOf")) == 2


async def test_a_scanned_page_in_the_library_is_read_by_ocr(graph: Graph, tmp_path: Path) -> None:
    settings = graph.settings(tmp_path, CRAG_OCR="tesseract")
    if not isinstance(ocr_engine(settings), TesseractOcr):
        unavailable("Tesseract is needed to read the scanned page (Debian: tesseract-ocr tesseract-ocr-jpn)")
    lines = ["社用車の利用規程", "給油カードは車検証入れに保管すること。"]
    graph.fake.put_file(graph.drive, "General/car.png", png_bytes(page_image(lines)))

    def scanned_text(index: LocalIndex | None) -> str:
        assert index is not None
        return " ".join(c.text for c in index.chunks if c.file == "General/car.png")

    # First without OCR: the scan is skipped, and named as such.
    without = graph.settings(tmp_path, CRAG_OCR="off")
    async with graph.client(without) as client:
        first = await sync_to_local(without, client)
    assert scanned_text(first.index) == ""
    assert any(s.startswith("General/car.png") for s in first.result.skipped)
    # Then with Tesseract, the file unchanged: it is read now, not when someone next edits it.
    async with graph.client(settings) as client:
        second = await sync_to_local(settings, client)
    text = scanned_text(second.index)
    assert "給油カード" in text and "車検証" in text
