"""The answer as a Teams message: AI-generated label, citations, native feedback buttons, the card.

botbuilder's Entity serializes only `type`; the AI label and citations need `@type`, `@context`,
`@id`, `additionalType` and `citation`, so a subclass declares them for msrest. Teams accepts
exactly one root Message entity and at most 20 citations, each matching an [n] in the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from botbuilder.core import CardFactory
from botbuilder.schema import Activity, ActivityTypes, Entity

from cards.answer_card import answer_card
from crag.core.excerpt import excerpt
from crag.core.models import CITATION_MARKER, CragResult
from crag.core.safe_links import link_text, safe_markdown, safe_url
from hosting.ui_texts import Lang

MAX_CITATIONS = 20


class AIMessageEntity(Entity):  # type: ignore[misc]
    _attribute_map: ClassVar[dict[str, dict[str, str]]] = {
        "type": {"key": "type", "type": "str"},
        "at_type": {"key": "@type", "type": "str"},
        "at_context": {"key": "@context", "type": "str"},
        "at_id": {"key": "@id", "type": "str"},
        "additional_type": {"key": "additionalType", "type": "[str]"},
        "citation": {"key": "citation", "type": "[object]"},
    }

    def __init__(self, *, citation: list[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(type="https://schema.org/Message", **kwargs)
        self.at_type = "Message"
        self.at_context = "https://schema.org"
        self.at_id = ""
        self.additional_type = ["AIGeneratedContent"]
        self.citation = citation or []


def citations_entity(result: CragResult, text: str | None = None) -> AIMessageEntity:
    """The AI label and the citations of the markers in `text` (the message text as sent)."""
    used = {int(m) for m in CITATION_MARKER.findall(result.answer if text is None else text)}
    claims: list[dict[str, Any]] = []
    for c in result.citations:
        if c.number not in used or len(claims) >= MAX_CITATIONS:
            continue
        appearance: dict[str, Any] = {
            "@type": "DigitalDocument",
            "name": _clip(c.title or c.file or c.url, 80),
            # Cut where a reader can stop (a cached answer of an earlier release may hold a longer one).
            "abstract": excerpt(c.excerpt or c.title, 160),
        }
        url = safe_url(c.url)  # never a javascript: or data: link behind a citation
        if url:
            appearance["url"] = url
        if c.kind == "document" and c.file:
            appearance["keywords"] = [c.file[:50]]
        claims.append({"@type": "Claim", "position": c.number, "appearance": appearance})
    return AIMessageEntity(citation=claims)


@dataclass(frozen=True)
class Reply:
    """The answer's activity, and its card as a dict (what the feedback store keeps)."""

    activity: Activity
    card: dict[str, Any]


def answer_reply(
    result: CragResult, channel_id: str, lang: Lang | None = None, show_scores: bool = False
) -> Reply:
    """The reply for a channel: in Teams the answer is the message text (so citations, the AI label
    and Teams' own feedback buttons attach to it) with the card below; elsewhere the card carries
    everything, its first words as the notification preview."""
    if channel_id != "msteams":
        card = answer_card(result, lang, show_scores=show_scores)
        activity = Activity(
            type=ActivityTypes.message,
            summary=_clip(link_text(result.answer), 150),
            attachments=[CardFactory.adaptive_card(card)],
        )
        return Reply(activity, card)
    # Teams' native thumbs are on the message (feedbackLoop below): the card adds no second pair.
    card = answer_card(result, lang, include_answer=False, feedback_buttons=False, show_scores=show_scores)
    text = safe_markdown(result.answer)
    activity = Activity(
        type=ActivityTypes.message,
        text=text,
        text_format="markdown",
        entities=[citations_entity(result, text)],
        channel_data={"feedbackLoop": {"type": "default"}},
        attachments=[CardFactory.adaptive_card(card)],
    )
    return Reply(activity, card)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
