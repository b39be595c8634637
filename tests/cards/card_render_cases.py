"""Every card the bot sends, built at test time by the real builders from real engine turns.

The engine is the embedded default over sample_docs/ (lexical, embeddings off: fast and the same on
every machine), with the real SerpAPI provider pointed at the eval set's fake SerpAPI on 127.0.0.1
(data/eval/sample-docs/web_fixtures.jsonl) when a case has web search on. Each case names the branch
badge it expects, so a question that no longer reaches its branch fails loudly instead of quietly
testing another card. The cards come from cards.teams_message.answer_reply (the Web Chat card,
which carries the answer, and the Teams card, whose answer is the message text), from
cards.answer_card.thanks_card / error_card and from cards.welcome_card: change a builder and the
tests render the new card.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from cards.answer_card import badge_key, error_card, thanks_card
from cards.teams_message import answer_reply
from cards.welcome_card import welcome_card
from crag.config.engine_settings import CragSettings
from crag.config.serpapi import SerpApiSettings
from crag.core.access import Reader
from crag.core.models import CragResult, GradedChunk, Notice, WebStatus
from crag.engine import CragEngine
from crag.eval.dataset import load_dataset
from crag.eval.fixture_web import FakeSerpApi
from crag.runtime.factory import build_engine, open_local_index
from hosting.examples import example_questions
from hosting.ui_texts import Lang, t
from tests.paths import ROOT, SAMPLE_DOCS

DATASET = ROOT / "data" / "eval" / "sample-docs"
BOT_NAME = "CRAG Assistant"
LANGS: tuple[Lang, ...] = ("ja", "en")


@dataclass(frozen=True)
class Turn:
    """One engine turn: a question of the eval set (by id), how the engine is set up, what it must reach."""

    question_id: dict[str, str]  # by language
    web: str  # "on": the fake SerpAPI; "off": no web search; "failed": SerpAPI answers with an error
    badge: str  # badge_key the turn must reach
    refused: bool = False
    search_failed: bool = False  # the document index raises on every search


TURNS: dict[str, Turn] = {
    "correct": Turn({"ja": "sd-003", "en": "sd-037"}, "on", "branch.correct"),
    # Documents and the web both quoted: rare since the badge follows what the answer cites (the
    # composer prefers document sentences); only this Japanese question of the set reaches it.
    "ambiguous_web": Turn({"ja": "sd-107"}, "on", "branch.ambiguous"),
    "ambiguous_no_web": Turn({"ja": "sd-073", "en": "sd-088"}, "off", "branch.documents_unsure"),
    "incorrect_web": Turn({"ja": "sd-069", "en": "sd-001"}, "on", "branch.incorrect"),
    "not_found_no_web": Turn({"ja": "sd-069", "en": "sd-001"}, "off", "branch.not_found", refused=True),
    # The web was searched but nothing answers: the badge says not found, not "from the web".
    "refused_web": Turn({"ja": "sd-080", "en": "sd-063"}, "on", "branch.not_found", refused=True),
    "web_failed": Turn({"ja": "sd-069", "en": "sd-001"}, "failed", "branch.not_found", refused=True),
    "search_failed": Turn({"ja": "sd-069", "en": "sd-001"}, "on", "branch.incorrect", search_failed=True),
}
# Each answer turn as two cards: Web Chat's (the answer in the card) and Teams' (the answer is the
# message text; the card keeps the badge and the sources, and Teams' own thumbs are on the message).
CHANNELS = {"webchat": "webchat", "teams": "msteams"}
OTHER_CARDS = ("welcome", "thanks", "error")


def case_names() -> list[str]:
    """Every card's name, known before any card is built (for test ids)."""
    names = [
        f"{turn}-{lang}-{channel}"
        for turn, spec in TURNS.items()
        for lang in LANGS
        if lang in spec.question_id
        for channel in CHANNELS
    ]
    return names + [f"{other}-{lang}" for other in OTHER_CARDS for lang in LANGS]


@dataclass(frozen=True)
class CardCase:
    name: str
    lang: Lang
    card: dict[str, Any]
    # Teams' notification preview: the message text when the reply has one, else the card's.
    message_text: str = ""


class _DeadRetriever:
    """A document index that cannot be reached (as tests/crag/outbound/test_breaker.py's)."""

    name = "dead"

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        raise ConnectionError("index unreachable")


async def _turns(work: Path) -> dict[tuple[str, Lang], CragResult]:
    dataset = load_dataset(DATASET)
    questions = {q.id: q.question for q in dataset.questions}
    serp = FakeSerpApi(dataset.web_fixtures)
    await serp.start()
    try:
        base = CragSettings(
            CRAG_DOCS_DIR=str(SAMPLE_DOCS),
            CRAG_INDEX_DIR=str(work / "index"),
            CRAG_EMBEDDINGS="off",
            # Words-only grades may answer from the documents alone here, so that a lexical engine
            # (no vectors to build) reaches the green card too.
            CRAG_WORDS_ONLY_ANSWERS=True,
            CRAG_VECTOR_CACHE="",
            CRAG_CACHE_TTL=0,
            CRAG_WEB="off",
        )
        index, _ = open_local_index(base)

        def engine(web: str) -> CragEngine:
            if web == "off":
                return build_engine(base, index)
            # "failed": the fake answers 404 under a wrong base path, as a broken endpoint would.
            url = serp.url if web == "on" else f"{serp.url}/no-such-endpoint"
            serpapi = SerpApiSettings(SERPAPI_API_KEY=SecretStr("fake-key"), SERPAPI_BASE_URL=url)
            return build_engine(
                base.model_copy(update={"web_provider": "serpapi", "serpapi": serpapi}), index
            )

        engines: dict[str, CragEngine] = {web: engine(web) for web in ("on", "off", "failed")}
        results: dict[tuple[str, Lang], CragResult] = {}
        for name, turn in TURNS.items():
            for lang in (lang for lang in LANGS if lang in turn.question_id):
                e = engines[turn.web]
                if turn.search_failed:
                    e = CragEngine(e.rewriter, _DeadRetriever(), e.grader, e.web, e.generator, e.config)
                serp.current = turn.question_id[lang]
                result = await e.run(questions[turn.question_id[lang]])
                _check_turn(name, lang, turn, result)
                results[(name, lang)] = result
        for e in engines.values():
            await e.close()
        return results
    finally:
        await serp.stop()


def _check_turn(name: str, lang: Lang, turn: Turn, result: CragResult) -> None:
    reached = (badge_key(result), result.refused, Notice.SEARCH_FAILED.value in result.notices)
    wanted = (turn.badge, turn.refused, turn.search_failed)
    if reached != wanted:
        raise AssertionError(
            f"case {name}-{lang} ({turn.question_id[lang]}) reached (badge, refused, search_failed) "
            f"{reached}, not {wanted}: the engine changed; pick another eval question for this case"
        )
    if turn.web == "failed" and result.web.status is not WebStatus.FAILED:
        raise AssertionError(f"case {name}-{lang}: web status {result.web.status}, not failed")
    if result.language != lang:
        raise AssertionError(f"case {name}-{lang}: the engine answered in {result.language}")


def build_cases(work: Path) -> dict[str, CardCase]:
    """Run the engine turns and build every card (a few seconds: the index is lexical)."""
    results = asyncio.run(_turns(work))
    cases: dict[str, CardCase] = {}
    for (name, lang), result in results.items():
        for channel, channel_id in CHANNELS.items():
            reply = answer_reply(result, channel_id)
            key = f"{name}-{lang}-{channel}"
            cases[key] = CardCase(key, lang, reply.card, reply.activity.text or "")
    builders: dict[str, Callable[[Lang], dict[str, Any]]] = {
        "welcome": lambda lang: welcome_card(BOT_NAME, lang, example_questions(lang, SAMPLE_DOCS)),
        # The Teams card of a correct answer after a 👍: the buttons gone, a thank-you line instead.
        "thanks": lambda lang: thanks_card(cases[f"correct-{lang}-teams"].card, "up", lang),
        "error": lambda lang: error_card(t("error", lang)),
    }
    for other, build in builders.items():
        for lang in LANGS:
            key = f"{other}-{lang}"
            cases[key] = CardCase(key, lang, build(lang))
    assert sorted(cases) == sorted(case_names())
    return cases
