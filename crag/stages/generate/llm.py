"""Answer generation with the language model: cited, concise, or the fixed refusal text.

Follow-up suggestions are asked for in the same call, after the answer and behind a marker that the
stream holds back: one model call per answer, as the peers make. When the model fails, the
extractive composer answers and the turn says so.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Literal

from crag.core.excerpt import excerpt
from crag.core.models import CITATION_MARKER, Citation, GeneratedAnswer, GradedChunk, Notice, WebResult
from crag.core.protocols import AnswerGenerator, AnswerRequest, TextSink
from crag.core.safe_links import safe_markdown
from crag.core.texts import REFUSAL
from crag.providers.llm import prompts
from crag.providers.llm.client import LlmClient, LlmUnavailable
from crag.tracing import turn_trace

log = logging.getLogger(__name__)

_SOURCE_CHARS = 2500


class LlmGenerator:
    name = "llm-generate"

    def __init__(self, llm: LlmClient, fallback: AnswerGenerator, followups: bool = True) -> None:
        self._llm = llm
        self._fallback = fallback
        self._followups = followups

    async def generate(self, ask: AnswerRequest, on_text: TextSink | None = None) -> GeneratedAnswer:
        question, language = ask.question, ask.language
        if ask.lacking:
            # "The documents don't state it", then the nearest passage or the web's: the composer
            # words it the same whatever the model would say.
            return await self._fallback.generate(ask, on_text)
        sources = _sources(ask.chunks, ask.web)
        if not sources:
            return GeneratedAnswer(text=REFUSAL[language], refused=True)
        fence = prompts.Fence()
        block = "\n\n".join(f"[{c.number}]\n{fence.wrap(_source_text(c, text))}" for c, text in sources)
        user = f"Sources:\n{block}\n\nQuestion: {question}"
        system = prompts.ANSWER.format(refusal=REFUSAL[language])
        max_tokens = 700
        if self._followups:
            system += prompts.ANSWER_FOLLOWUPS
            max_tokens += 150
        try:
            if on_text is not None:
                reply = await self._llm.chat_stream(system, user, _safe_sink(on_text), max_tokens=max_tokens)
            else:
                reply = await self._llm.chat(system, user, max_tokens=max_tokens)
        except LlmUnavailable as exc:
            log.warning("generation fell back to the extractive composer: %s", exc)
            turn_trace.current().notice(Notice.LLM_FALLBACK)
            return await self._fallback.generate(ask)
        answer, _, tail = reply.partition(prompts.FOLLOWUPS_MARKER)
        followups = _followups(tail) if self._followups else []
        return _finish(answer.strip(), [c for c, _ in sources], language, followups)


def _sources(chunks: Sequence[GradedChunk], web: Sequence[WebResult]) -> list[tuple[Citation, str]]:
    out: list[tuple[Citation, str]] = []
    for g in chunks:
        c = g.chunk
        citation = Citation(
            number=len(out) + 1,
            kind="document",
            title=c.title,
            url=c.url,
            file=c.file,
            excerpt=excerpt(c.text),
        )
        out.append((citation, c.text[:_SOURCE_CHARS]))
    for w in web:
        citation = Citation(
            number=len(out) + 1, kind="web", title=w.title, url=w.url, excerpt=excerpt(w.snippet)
        )
        out.append((citation, w.snippet[:_SOURCE_CHARS]))
    return out


def _safe_sink(on_text: TextSink) -> TextSink:
    # The stream shows the model's text before the card does: it gets the same link policy, and
    # never the follow-up suggestions after the marker (nor a marker half written).
    async def sink(text: str) -> None:
        await on_text(safe_markdown(answer_part(text)))

    return sink


def answer_part(text: str) -> str:
    """The answer in a (possibly partial) reply: what precedes the follow-up marker, without a
    trailing piece that may be the marker's beginning."""
    marker = prompts.FOLLOWUPS_MARKER
    if marker in text:
        return text.split(marker, 1)[0]
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return text[:-k]
    return text


def _source_text(citation: Citation, text: str) -> str:
    # The title and location come from the document (or the web page) too: they stay inside the
    # fence, after the text, which the model reads first.
    return f"{text}\n(source: {citation.title}, {citation.file or citation.url})"


def _finish(
    text: str, sources: list[Citation], language: Literal["ja", "en"], followups: list[str]
) -> GeneratedAnswer:
    if not text or REFUSAL[language] in text or REFUSAL["en"] in text or REFUSAL["ja"] in text:
        return GeneratedAnswer(text=REFUSAL[language], refused=True)
    text = safe_markdown(text)  # what the stream showed, and what is stored and cached
    # Renumber the cited sources 1..n in order of first use, and drop markers that name no source.
    by_number = {c.number: c for c in sources}
    order: dict[int, int] = {}
    for m in CITATION_MARKER.finditer(text):
        n = int(m.group(1))
        if n in by_number and n not in order:
            order[n] = len(order) + 1

    def renumber(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return f"[{order[n]}]" if n in order else ""

    text = CITATION_MARKER.sub(renumber, text)
    citations = [by_number[n].model_copy(update={"number": new}) for n, new in order.items()]
    return GeneratedAnswer(text=text, citations=citations, followups=followups)


def _followups(reply: object) -> list[str]:
    if not isinstance(reply, str):
        return []  # a failed suggestion call costs the user nothing
    match = re.search(r"\[.*\]", reply, re.S)
    try:
        values = json.loads(match.group(0)) if match else []
    except ValueError:
        return []
    return [str(v).strip()[:150] for v in values if isinstance(v, str) and v.strip()][:3]
