"""The answer card: answer, branch, cited files, web sources, passage scores and feedback buttons."""

from __future__ import annotations

import json
from typing import Any

from crag.models import Branch, CragResult, WebStatus
from crag.safe_links import link_text, markdown_link, safe_markdown
from texts import Lang, has_text, t

CARD_VERSION = "1.5"
MAX_CARD_BYTES = 28_000
FEEDBACK_ACTION = "crag.feedback"
ASK_ACTION = "crag.ask"
_MAX_SCORE_ROWS = 10


def answer_card(
    result: CragResult, lang: Lang | None = None, include_answer: bool = True, execute: bool = False
) -> dict[str, Any]:
    """The answer card. Without the answer text (Teams shows it as the message text, where the
    citations and the AI label attach) the card keeps the branch, sources, scores and buttons.
    With `execute` (Teams) the thumbs are Action.Execute, so the card can be refreshed in place,
    with an Action.Submit fallback for clients that do not know Execute."""
    lang = lang or result.language
    badge = badge_key(result)
    body: list[dict[str, Any]] = [
        {
            "type": "ColumnSet",
            "columns": [
                {
                    "type": "Column",
                    "width": "stretch",
                    "items": [_text(t("answer_title", lang), weight="Bolder", size="Medium")],
                },
                {
                    "type": "Column",
                    "width": "auto",
                    "items": [
                        _text(
                            t(badge, lang),
                            color=_BADGE_COLOR[badge],
                            weight="Bolder",
                            id="branch",
                        )
                    ],
                },
            ],
        },
    ]
    if include_answer:
        body.append(_text(safe_markdown(result.answer), id="answer"))
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

    docs = [c for c in result.citations if c.kind == "document"]
    if docs:
        body.append(_text(t("sources", lang), weight="Bolder", spacing="Medium"))
        lines = [f"[{c.number}] {_link(c.title, c.url)} — {_code(c.file)}" for c in docs]
        body.append(_text("\n\n".join(lines), id="cited_files"))
    web = [c for c in result.citations if c.kind == "web"]
    if web:
        body.append(_text(t("web_sources", lang), weight="Bolder", spacing="Medium"))
        body.append(_text("\n\n".join(f"[{c.number}] {_link(c.title, c.url)}" for c in web), id="web_urls"))

    if result.queries:
        # Every search the turn made: the first, then any re-search for what it did not cover.
        queries = " / ".join(_clip(q, 120) for q in result.queries[:3])
        searched = f"🔎 {t('searched', lang)}: {safe_markdown(queries)}"
        body.append(_text(searched, id="query", isSubtle=True, size="Small", spacing="Medium"))
    if result.graded:
        facts = [
            {
                "title": f"{g.score:.2f} {'✓' if g.kept else '·'}",
                # FactSet values are Markdown too, and headers come from the document.
                "value": safe_markdown(
                    _clip(f"{g.chunk.file} › {' › '.join(g.chunk.headers[1:]) or g.chunk.title}", 90)
                ),
            }
            for g in sorted(result.graded, key=lambda g: -g.score)[:_MAX_SCORE_ROWS]
        ]
        body.append(
            {
                "type": "Container",
                "id": "scores",
                "spacing": "Medium",
                "items": [
                    _text(
                        f"{t('relevance', lang)} (✓ {t('kept', lang)} / · {t('not_kept', lang)})",
                        isSubtle=True,
                        size="Small",
                    ),
                    {"type": "FactSet", "facts": facts},
                ],
            }
        )

    body.append(_text(t("helpful", lang), id="helpful", spacing="Medium", size="Small", isSubtle=True))
    card = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        "body": body,
        "actions": [
            _feedback_action(result.id, "up", lang, execute),
            _feedback_action(result.id, "down", lang, execute),
        ],
    }
    return _fit(card)


def _feedback_action(result_id: str, reaction: str, lang: Lang, execute: bool) -> dict[str, Any]:
    submit = {
        "type": "Action.Submit",
        "title": t("thumbs_up" if reaction == "up" else "thumbs_down", lang),
        "data": {"action": FEEDBACK_ACTION, "result_id": result_id, "reaction": reaction},
    }
    if not execute:
        return submit
    return {**submit, "type": "Action.Execute", "verb": FEEDBACK_ACTION, "fallback": submit}


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
    if result.branch is Branch.INCORRECT:
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
    """What the answer came from, as the badge says it: the branch, unless the web it names gave
    nothing (web search off or failed): then "documents, check the sources" or "not found"."""
    web = bool(result.web.results)
    if result.branch is Branch.CORRECT:
        return "branch.correct"
    if result.branch is Branch.AMBIGUOUS:
        return "branch.ambiguous" if web else "branch.documents_unsure"
    return "branch.incorrect" if web else "branch.not_found"


def _text(text: str, **props: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **props}


def _link(title: str, url: str) -> str:
    # Titles and URLs come from documents and web results: crag.safe_links decides what links.
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
