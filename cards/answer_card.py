"""The answer card: what the answer came from, the answer, its sources (behind a toggle) and feedback."""

from __future__ import annotations

import json
from typing import Any

from crag.core.models import Branch, CragResult, GradedChunk, Thresholds, WebStatus
from crag.core.safe_links import link_text, markdown_link, safe_markdown
from hosting.ui_texts import Lang, has_text, t

CARD_VERSION = "1.5"
MAX_CARD_BYTES = 28_000
FEEDBACK_ACTION = "crag.feedback"
ASK_ACTION = "crag.ask"
_MAX_SCORE_ROWS = 10


def answer_card(
    result: CragResult,
    lang: Lang | None = None,
    include_answer: bool = True,
    feedback_buttons: bool = True,
    show_scores: bool = False,
) -> dict[str, Any]:
    """The answer card: what the answer came from (the badge), the answer, notices, and the sources
    behind a "Show sources" toggle (only the passages the answer used, with a plain-language match
    label; raw grades of every passage only with `show_scores`).

    Without the answer text (Teams shows it as the message text, where the citations and the AI
    label attach) the card keeps the rest. Without `feedback_buttons` (Teams' own feedback buttons
    are on the message) it has no thumbs; elsewhere they are Action.Submit, which every client of
    the bot renders (Teams cards of earlier releases carried Action.Execute: bot/invokes.py still
    takes their clicks)."""
    lang = lang or result.language
    badge = badge_key(result)
    body: list[dict[str, Any]] = [
        _text(t(badge, lang), color=_BADGE_COLOR[badge], weight="Bolder", id="branch"),
    ]
    if include_answer:
        body.append(_text(safe_markdown(result.answer), id="answer", spacing="Small"))
    for notice in _notices(result, lang):
        body.append(_text(notice, isSubtle=True, size="Small"))
    if result.followups:
        body.append(_text(t("followups", lang), weight="Bolder", spacing="Medium", size="Small"))
        body.append(
            {
                "type": "ActionSet",
                "id": "followups",
                "actions": [
                    {
                        "type": "Action.Submit",
                        "title": _clip(q, 80),
                        "data": {"action": ASK_ACTION, "question": q},
                    }
                    for q in result.followups[:3]
                ],
            }
        )
    sources = _sources(result, lang, show_scores)
    if sources:
        cited = len(result.citations)
        label = t("show_sources", lang, count=cited) if cited else t("show_details", lang)
        body.append(
            {
                "type": "ActionSet",
                "id": "show_sources",
                "spacing": "Medium",
                "actions": [
                    {"type": "Action.ToggleVisibility", "title": label, "targetElements": ["sources"]}
                ],
            }
        )
        body.append({"type": "Container", "id": "sources", "isVisible": False, "items": sources})
    actions: list[dict[str, Any]] = []
    if feedback_buttons:
        body.append(_text(t("helpful", lang), id="helpful", spacing="Medium", size="Small", isSubtle=True))
        actions = [
            _feedback_action(result.id, "up", lang),
            _feedback_action(result.id, "down", lang),
        ]
    card = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        # What a client shows where it cannot render the card, and as a notification preview.
        "fallbackText": _clip(link_text(result.answer), 150),
        "body": body,
        "actions": actions,
    }
    return _fit(card)


def _sources(result: CragResult, lang: Lang, show_scores: bool) -> list[dict[str, Any]]:
    """The toggle's content: the documents and web pages the answer cites, the searches made, and
    (for administrators) every passage's grade."""
    items: list[dict[str, Any]] = []
    docs = [c for c in result.citations if c.kind == "document"]
    if docs:
        items.append(_text(t("sources", lang), weight="Bolder", size="Small"))
        lines = [
            f"[{c.number}] {_link(c.title, c.url)} — {_code(c.file)}{_where(result, c.file, lang)}"
            for c in docs
        ]
        items.append(_text("\n\n".join(lines), id="cited_files", size="Small"))
    web = [c for c in result.citations if c.kind == "web"]
    if web:
        items.append(_text(t("web_sources", lang), weight="Bolder", size="Small", spacing="Small"))
        lines = [f"[{c.number}] {_link(c.title, c.url)}" for c in web]
        items.append(_text("\n\n".join(lines), id="web_urls", size="Small"))
    if result.queries:
        # Every search the turn made: the first, then any re-search for what it did not cover.
        queries = " / ".join(_clip(q, 120) for q in result.queries[:3])
        searched = f"🔎 {t('searched', lang)}: {safe_markdown(queries)}"
        items.append(_text(searched, id="query", isSubtle=True, size="Small", spacing="Small"))
    if show_scores and result.graded:
        facts = [
            {
                "title": f"{g.score:.2f} {'✓' if g.kept else '·'}",
                # FactSet values are Markdown too, and headers come from the document.
                "value": safe_markdown(_clip(f"{g.chunk.file} › {_section(g)}", 90)),
            }
            for g in sorted(result.graded, key=lambda g: -g.score)[:_MAX_SCORE_ROWS]
        ]
        legend = f"{t('relevance', lang)} (✓ {t('kept', lang)} / · {t('not_kept', lang)})"
        items.append(
            {
                "type": "Container",
                "id": "scores",
                "spacing": "Small",
                "items": [_text(legend, isSubtle=True, size="Small"), {"type": "FactSet", "facts": facts}],
            }
        )
    return items


def _where(result: CragResult, file: str, lang: Lang) -> str:
    """› the cited section · how well it matched the question (from its best kept passage)."""
    kept = [g for g in result.graded if g.kept and g.chunk.file == file]
    if not kept:
        return ""
    best = max(kept, key=lambda g: g.score)
    section = _section(best)
    where = f" › {safe_markdown(_clip(section, 60))}" if section and section != best.chunk.title else ""
    return f"{where} · {t(match_key(best.score, result.thresholds), lang)}"


def match_key(score: float, thresholds: Thresholds) -> str:
    """A plain-language label for a grade, by the thresholds the turn was routed with."""
    return f"match.{thresholds.match(score)}"


def _section(g: GradedChunk) -> str:
    return " › ".join(g.chunk.headers[1:]) or g.chunk.title


def _feedback_action(result_id: str, reaction: str, lang: Lang) -> dict[str, Any]:
    return {
        "type": "Action.Submit",
        "title": t("thumbs_up" if reaction == "up" else "thumbs_down", lang),
        "data": {"action": FEEDBACK_ACTION, "result_id": result_id, "reaction": reaction},
    }


def thanks_card(card: dict[str, Any], reaction: str, lang: Lang) -> dict[str, Any]:
    """The answer card after a rating: the buttons are gone and a thank-you line takes their place."""
    done: dict[str, Any] = json.loads(json.dumps(card))
    done["actions"] = []
    done["body"] = [b for b in done["body"] if b.get("id") != "helpful"]
    key = "feedback.thanks_up" if reaction == "up" else "feedback.thanks_down"
    done["body"].append(_text(t(key, lang), id="thanks", spacing="Medium", size="Small", color="Good"))
    return done


def error_card(message: str) -> dict[str, Any]:
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "body": [_text(message, color="Attention")],
    }


def _notices(result: CragResult, lang: Lang) -> list[str]:
    notices = []
    if result.web.status is WebStatus.OFF:
        notices.append(t("web.off", lang))
    elif result.web.status is WebStatus.FAILED:
        notices.append(t("web.failed", lang))
    if result.branch is Branch.INCORRECT and result.web.results:
        # Beside a web answer: say why it is not from the documents (without one the badge says it).
        notices.append(t("no_documents", lang))
    for code in result.notices:
        key = f"notice.{code}"
        if has_text(key):
            notices.append(t(key, lang))
    return notices


_BADGE_COLOR = {
    "branch.correct": "Good",
    "branch.ambiguous": "Warning",
    "branch.documents_unsure": "Warning",
    "branch.incorrect": "Accent",
    "branch.not_found": "Default",
}


def badge_key(result: CragResult) -> str:
    """What the answer came from, as the badge says it: what it cites, not only the branch. An
    ambiguous answer that quotes no web page is "documents, check the sources"; a web branch whose
    search gave nothing usable (off, failed, or nothing quoted) is "not found in the documents"."""
    docs = any(c.kind == "document" for c in result.citations)
    web = any(c.kind == "web" for c in result.citations)
    if result.refused or not (docs or web):
        return "branch.not_found"
    if result.branch is Branch.CORRECT:
        return "branch.correct"
    if docs and web:
        return "branch.ambiguous"
    return "branch.documents_unsure" if docs else "branch.incorrect"


def _text(text: str, **props: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **props}


def _link(title: str, url: str) -> str:
    # Titles and URLs come from documents and web results: crag.core.safe_links decides what links.
    return markdown_link(_clip(title, 80), url)


def _code(text: str) -> str:
    # A backtick in a file name would close the code span and let the rest render as Markdown.
    return "`" + link_text(text).replace("`", "'") + "`"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def card_size(card: dict[str, Any]) -> int:
    return len(json.dumps(card, ensure_ascii=False).encode())


def _fit(card: dict[str, Any]) -> dict[str, Any]:
    """Keep the card under the size budget by shortening the answer (only a huge answer can exceed it)."""
    while card_size(card) > MAX_CARD_BYTES:
        answer = next((b for b in card["body"] if b.get("id") == "answer"), None)
        if answer is None:
            break
        answer["text"] = _clip(answer["text"], max(200, len(answer["text"]) * 3 // 4))
        if len(answer["text"]) <= 200:
            break
    return card
