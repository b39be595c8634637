"""Access trimming through the real bot: Teams activities with `from.aadObjectId` posted to
/api/messages of the real app (in process, local mode), the replies caught by a fake Bot Connector,
and the document links of the cards opened on /docs/. The asker is who Teams says; their groups
come from the access file; whoever cannot be identified reads only what everyone may read."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app import RUNTIME
from hosting.doc_links import DocLinks
from tests.crag.access.test_access_trimming import ACCESS, DOCS, SALARY_Q, USER_A, USER_B
from tests.fakes.bot_connector import FakeConnector, card_of, card_text, make_activity
from tests.servers.app_harness import APP_ID, Client, serve_app

BOT = {"id": "28:bot-app-id", "name": "CRAG Assistant"}


def folder(root: Path) -> Path:
    docs = root / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, "utf-8")
    (docs / ".access.toml").write_text(ACCESS, "utf-8")
    return docs


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Client]:
    env = {
        "CRAG_DOCS_DIR": str(folder(tmp_path)),
        "CRAG_ACCESS_TRIMMING": "true",
        "CRAG_EMBEDDINGS": "off",
        "CRAG_STREAMING": "false",
    }
    async with serve_app(tmp_path, ready=True, **env) as (client, _):
        yield client


def teams(
    connector: FakeConnector, user: str | None, conv_type: str = "personal", text: str = SALARY_Q
) -> dict[str, Any]:
    activity = make_activity(connector.url, channel_id="msteams", text=text, locale="en-US")
    activity["from"] = {"id": "29:someone", "name": "Someone", **({"aadObjectId": user} if user else {})}
    activity["recipient"] = BOT
    activity["conversation"] = {"id": f"conv-{user}-{conv_type}", "conversationType": conv_type}
    if conv_type != "personal":
        activity["text"] = f"<at>{BOT['name']}</at> {text}"
        activity["entities"] = [{"type": "mention", "text": f"<at>{BOT['name']}</at>", "mentioned": BOT}]
    return activity


async def ask(client: Client, connector: FakeConnector, activity: dict[str, Any]) -> dict[str, Any]:
    since = len(connector.activities)
    async with client.post("/api/messages", json=activity) as resp:
        assert resp.status in (200, 201), await resp.text()
    [reply] = await connector.wait_for_messages(1, since)
    return reply


def salary_link(reply: dict[str, Any]) -> str | None:
    """The link to the B-only document anywhere in the reply (card Markdown, citation entities)."""
    found = re.findall(r"https?://[^\s)\"']*/docs/hr/salary_bands\.md[^\s)\"']*", json.dumps(reply))
    return found[0] if found else None


async def test_teams_users_get_only_what_they_may_read(bot: Client, connector: FakeConnector) -> None:
    as_b = await ask(bot, connector, teams(connector, USER_B))
    card = card_of(as_b)
    assert card is not None and "salary_bands.md" in card_text(card)  # the card cites it
    assert "9,400,000" in as_b["text"]  # Teams shows the answer as the message's text
    link = salary_link(as_b)
    assert link is not None and f"u={USER_B}" in link  # the link names whom it was made for

    # A (group A), an unknown Teams user, the Emulator (no aadObjectId), a malformed id: the whole
    # reply, card and citation entities included, holds nothing of the B-only document.
    for activity in (
        teams(connector, USER_A),
        teams(connector, "cccccccc-0000-4000-8000-00000000000c"),
        make_activity(connector.url, text=SALARY_Q, channel_id="emulator", user_id=USER_B),
        teams(connector, "not-an-object-id"),
    ):
        reply = json.dumps(await ask(bot, connector, activity), ensure_ascii=False)
        assert "9,400,000" not in reply and "salary_bands" not in reply, reply
    # A's own document is A's.
    reply = await ask(
        bot, connector, teams(connector, USER_A, text="What is the Osaka quarterly sales target?")
    )
    assert "120 million" in reply["text"] and "sales/targets.md" in card_text(card_of(reply) or {})

    # In a channel every member sees the answer: only what everyone may read, even when B asks.
    in_channel = json.dumps(await ask(bot, connector, teams(connector, USER_B, "channel")))
    assert "9,400,000" not in in_channel and "salary_bands" not in in_channel

    # The card's link opens the document for B only (its readers checked now, not when it was sent).
    path = urlsplit(link)
    target = f"{path.path}?{path.query}"
    async with bot.get(target) as resp:
        assert resp.status == 200 and "9,400,000" in await resp.text()
    for forged in (path.path, f"{path.path}?u={USER_A}", f"{path.path}?u=nonsense"):
        async with bot.get(forged) as resp:
            assert resp.status == 404, forged
    async with bot.get("/docs/handbook.md") as resp:
        assert resp.status == 200  # everyone's document, without a user
    # /api/health says trimming is on.
    async with bot.get("/api/health") as resp:
        health = await resp.json()
    assert health["access"] == {"trimming": True, "unknown": "deny", "documents_without_rule": 1}


async def test_a_revoked_reader_cannot_open_an_old_link(bot: Client, connector: FakeConnector) -> None:
    link = salary_link(await ask(bot, connector, teams(connector, USER_B)))
    assert link is not None
    runtime = bot.app[RUNTIME]
    docs = runtime.settings.docs_dir
    (docs / ".access.toml").write_text(ACCESS.replace(f'group-b = ["{USER_B}"]', "group-b = []"), "utf-8")
    # The groups come from the file as it is now (the index need not even be rebuilt for this).
    path = urlsplit(link)
    async with bot.get(f"{path.path}?{path.query}") as resp:
        assert resp.status == 404


def test_signed_links_bind_their_user() -> None:
    links = DocLinks("https://bot.example/docs", b"secret", 3600, clock=lambda: 1000.0)
    url = links.sign_url("https://bot.example/docs/hr/salary_bands.md", USER_B)
    query = dict(p.split("=", 1) for p in urlsplit(url).query.split("&"))
    assert query["u"] == USER_B
    assert links.allows("hr/salary_bands.md", query["exp"], query["sig"], USER_B)
    assert not links.allows("hr/salary_bands.md", query["exp"], query["sig"], USER_A)  # u changed
    assert not links.allows("hr/salary_bands.md", query["exp"], query["sig"])  # u removed
    # A link without a user is signed as before trimming existed (old cards keep working).
    plain = links.sign_url("https://bot.example/docs/handbook.md")
    assert "u=" not in plain
    q = dict(p.split("=", 1) for p in urlsplit(plain).query.split("&"))
    assert links.allows("handbook.md", q["exp"], q["sig"])


async def test_signed_links_open_only_for_their_user_while_they_may_read(tmp_path: Path) -> None:
    """With an app id (links signed): the signature covers the user; a valid link for a user who
    may not read the file is still refused."""
    env = {
        "CRAG_DOCS_DIR": str(folder(tmp_path)),
        "CRAG_ACCESS_TRIMMING": "true",
        "CRAG_EMBEDDINGS": "off",
        "MicrosoftAppId": APP_ID,
        "MicrosoftAppPassword": "client-secret-for-test",
        "CRAG_LINK_SECRET": "link-secret-for-test",
    }
    async with serve_app(tmp_path, ready=True, **env) as (client, app):
        runtime = app[RUNTIME]

        def signed(file: str, user: str) -> str:
            url = runtime.links.sign_url(f"{runtime.docs_url}/{file}", user)
            return url[len(runtime.settings.base_url) :]

        async def status(path: str) -> int:
            async with client.get(path) as resp:
                return resp.status

        assert await status(signed("hr/salary_bands.md", USER_B)) == 200
        assert await status(signed("hr/salary_bands.md", USER_A)) == 404  # signed, but A may not read
        assert await status(signed("hr/salary_bands.md", "")) == 404  # an everyone-link to B's file
        assert await status(signed("handbook.md", "")) == 200
        forged = signed("hr/salary_bands.md", USER_A).replace(USER_A, USER_B)
        assert await status(forged) == 403  # the user is under the signature
