"""Every URL the bot emits is http(s) or mailto, and answer text carries no raw HTML: `javascript:` and
`data:` links from documents, web results or the model lose their link but keep their text, in the
card, in the Teams message and its citations, in web results, and in the streamed preview."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cards.answer_card import answer_card
from cards.teams_message import answer_reply
from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, Chunk, Citation, CragResult, GradedChunk, WebOutcome, WebStatus
from crag.core.protocols import AnswerRequest
from crag.core.safe_links import markdown_link, safe_markdown, safe_url
from crag.providers.web.serpapi import parse_results
from crag.runtime.factory import build_engine, open_local_index

EVIL_URLS = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "javascript&#58;alert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "//evil.example/x",
    "/relative/path",
    "https:///no-host",
    "mailto:",
    "",
]
GOOD_URLS = ["https://example.com/a?b=1#c", "http://localhost:3978/docs/leave.md", "mailto:hr@example.com"]

# Every Markdown link destination, autolink and HTML tag a renderer could act on.
_DESTINATION = re.compile(r"\]\(\s*<?([^)\s>]*)")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>")
_TAG = re.compile(r"<[A-Za-z/!?]")


def _allowed(url: str) -> bool:
    return url.lower().startswith(("http://", "https://", "mailto:"))


def _assert_safe_markdown(text: str) -> None:
    for url in _DESTINATION.findall(text) + _AUTOLINK.findall(text):
        assert _allowed(url), (url, text)
    assert not _TAG.search(text), text
    assert not re.search(r"^ {0,3}\[[^\]]+\]:", text, re.M), text  # no reference definitions


@pytest.mark.parametrize("url", EVIL_URLS)
def test_safe_url_refuses_everything_but_http_and_mailto(url: str) -> None:
    assert safe_url(url) == ""
    assert markdown_link("Title", url) == "Title"


@pytest.mark.parametrize("url", GOOD_URLS)
def test_safe_url_keeps_http_and_mailto(url: str) -> None:
    assert safe_url(url) == url
    assert markdown_link("A [b] title", url) == f"[A (b) title]({url})"


def test_safe_url_encodes_what_would_break_a_markdown_link() -> None:
    assert (
        safe_url("https://en.wikipedia.org/wiki/Foo_(bar) x")
        == "https://en.wikipedia.org/wiki/Foo_%28bar%29%20x"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Click [here](javascript:alert(1)) now [1].", "Click here now [1]."),
        ("[x]( javascript:alert(1) 'title')", "x"),
        ("[x](<javascript:alert(1)>)", "x"),
        ("[x](JaVaScRiPt:alert(1))", "x"),
        ("[x](java&#115;cript:alert(1))", "x"),
        ("[x](data:text/html;base64,PHNjcmlwdD4=)", "x"),
        ("See [the policy](https://example.com/p) [2].", "See [the policy](https://example.com/p) [2]."),
        ("[mail us](mailto:hr@example.com)", "[mail us](mailto:hr@example.com)"),
        ("![pixel](https://tracker.example/p.png)", "[pixel](https://tracker.example/p.png)"),
        ("![x](javascript:alert(1))", "x"),
        ("<javascript:alert(1)> and <https://example.com>", "javascript:alert(1) and https://example.com"),
        ("[1]: javascript:alert(1)\nFact [1].", "1\nFact [1]."),
        ("[1]: https://phish.example 'x'\nFact [1].", "1: https://phish.example\nFact [1]."),
        ("a<script>alert(1)</script>b", "ab"),
        ("a <img src=x onerror=alert(1)> b", "a  b"),
        ('<a href="javascript:alert(1)">link</a>', "link"),
        ("x <!-- hidden --> y", "x  y"),
        ("1 < 2 and x<y", "1 < 2 and x< y"),
        ("cut short <img src=x onerror", "cut short < img src=x onerror"),
        ("年次休暇は最大20日まで繰り越せます [1]。", "年次休暇は最大20日まで繰り越せます [1]。"),
    ],
)
def test_safe_markdown_neutralises_links_and_html(text: str, expected: str) -> None:
    assert safe_markdown(text) == expected
    _assert_safe_markdown(safe_markdown(text))


def test_nested_brackets_cannot_smuggle_a_link() -> None:
    for text in [
        "[a [b] c](javascript:alert(1))",
        "[[x](javascript:y)](javascript:z)",
        "[x]\n(javascript:y)",
    ]:
        _assert_safe_markdown(safe_markdown(text))


def test_safe_markdown_is_fast_on_hostile_input() -> None:
    hostile = "[" * 20000 + "](" * 20000 + "<a " * 20000 + "![x](" * 5000
    started = time.perf_counter()
    _assert_safe_markdown(safe_markdown(hostile))
    assert time.perf_counter() - started < 2.0


def _hostile_result() -> CragResult:
    chunk = Chunk(
        id="c",
        file="evil`<img src=x>`.md",
        title="Guide [x](javascript:alert(1))",
        headers=["Guide", "[y](javascript:alert(2))"],
        text="t",
        url="javascript:alert(3)",
    )
    return CragResult(
        question="q",
        language="en",
        branch=Branch.AMBIGUOUS,
        queries=["<img src=x onerror=alert(4)>"],
        graded=[GradedChunk(chunk=chunk, score=0.9, kept=True)],
        web=WebOutcome(status=WebStatus.OK),
        answer=(
            "Use [the form](javascript:alert(5)) [1]. <script>alert(6)</script>"
            "See <data:text/html,x> and [the page](https://example.com/page) [2].\n[1]: https://phish.example"
        ),
        citations=[
            Citation(
                number=1, kind="document", title=chunk.title, url=chunk.url, file=chunk.file, excerpt="e"
            ),
            Citation(number=2, kind="web", title="<b>Web</b>", url="data:text/html,x", excerpt="w"),
        ],
    )


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [
            t
            for k, v in node.items()
            for t in ([v] if k in ("text", "value") and isinstance(v, str) else _texts(v))
        ]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v)]
    return []


def test_the_answer_card_emits_only_allowed_links() -> None:
    card = answer_card(_hostile_result())
    texts = _texts(card)
    for text in texts:
        _assert_safe_markdown(text)
    dump = json.dumps(card)
    for bad in ("<script", "<img", "onerror", "](javascript:", "](data:", "(https://phish"):
        assert bad not in dump, bad
    answer = next(t for t in texts if "the form" in t)
    assert "Use the form [1]." in answer and "[the page](https://example.com/page) [2]" in answer


def test_the_teams_message_and_its_citations_emit_only_allowed_links() -> None:
    activity = answer_reply(_hostile_result(), "msteams").activity.serialize()
    _assert_safe_markdown(activity["text"])
    assert "Use the form [1]." in activity["text"]
    [entity] = activity["entities"]
    appearances = [c["appearance"] for c in entity["citation"]]
    assert [c["position"] for c in entity["citation"]] == [1, 2]  # markers still match the text
    assert all("url" not in a for a in appearances)  # javascript: and data: URLs are left out
    card = activity["attachments"][0]["content"]
    for text in _texts(card):
        _assert_safe_markdown(text)


def test_web_results_keep_only_http_links() -> None:
    data = {
        "answer_box": {"title": "Box", "answer": "42", "link": "javascript:alert(1)"},
        "organic_results": [
            {"title": "Bad", "link": "javascript:alert(1)", "snippet": "s"},
            {"title": "Data", "link": "data:text/html,x", "snippet": "s"},
            {"title": "Good", "link": "https://example.com/ok", "snippet": "s"},
        ],
        "related_questions": [{"question": "Q?", "snippet": "s", "link": "vbscript:x"}],
    }
    results = parse_results(data, 5)
    assert [(r.title, r.url) for r in results] == [
        ("Box", ""),
        ("Good", "https://example.com/ok"),
        ("Q?", ""),
    ]


async def test_the_streamed_preview_follows_the_same_policy() -> None:
    from crag.stages.generate.llm import LlmGenerator

    streamed: list[str] = []

    class StreamingLlm:
        async def chat(self, system: str, user: str, **kw: object) -> str:
            return "[]"

        async def chat_stream(self, system: str, user: str, on_text: Any, **kw: object) -> str:
            text = ""
            for piece in ["See [x](java", "script:alert(1)) <img src=x onerror=", "alert(1)> [1]."]:
                text += piece
                await on_text(text)
            return text

    async def sink(text: str) -> None:
        streamed.append(text)

    chunk = Chunk(id="c", file="a.md", title="A", text="Some text.")
    generator = LlmGenerator(StreamingLlm(), fallback=None)  # type: ignore[arg-type]
    answer = await generator.generate(
        AnswerRequest("q?", "en", [GradedChunk(chunk=chunk, score=0.9)], []), sink
    )
    assert len(streamed) == 3
    for text in [*streamed, answer.text]:
        _assert_safe_markdown(text)
    assert streamed[0] == "See [x] (java"  # a link cut short is already no link
    assert answer.text == "See x  [1]."


async def test_a_document_link_quoted_in_an_answer_does_not_render_as_a_link(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text(
        "# Leave\n\n## Carry-over\n\nUnused paid leave can be carried over up to 20 days, "
        "see [the leave form](javascript:alert(document.cookie)) <img src=x onerror=alert(1)>.\n",
        "utf-8",
    )
    settings = CragSettings(
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(tmp_path / "index"),
        CRAG_CACHE_TTL=0,
        CRAG_DOCS_BASE_URL="http://localhost:3978/docs",
    )
    engine = build_engine(settings, open_local_index(settings)[0])
    result = await engine.run("How many days of paid leave can be carried over?")
    assert "javascript:" in result.answer  # the composer quoted the planted sentence...
    card = answer_card(result)
    for text in _texts(card):
        _assert_safe_markdown(text)  # ...and the card shows its text without the link
    answer = next(t for t in _texts(card) if "20 days" in t)
    assert "the leave form" in answer and "](javascript" not in answer
    teams = answer_reply(result, "msteams").activity.serialize()
    _assert_safe_markdown(teams["text"])
    urls = [c["appearance"].get("url") for c in teams["entities"][0]["citation"]]
    assert urls == ["http://localhost:3978/docs/leave.md"]
