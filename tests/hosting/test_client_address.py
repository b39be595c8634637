"""Behind a reverse proxy the rate limits count clients, not the proxy: X-Forwarded-For is read only
from CRAG_TRUSTED_PROXIES, right to left, and ignored from anyone else."""

from __future__ import annotations

import pytest

from hosting.app_settings import BotSettings
from hosting.client_address import client_address, parse_networks
from tests.servers.webchat_harness import webchat_app
from tests.webchat.test_webchat_token import SECRET, FakeTokenService, directline  # noqa: F401

PROXIES = parse_networks(["10.0.0.0/8", "127.0.0.1"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("127.0.0.1", ["203.0.113.5"], "203.0.113.5"),  # one trusted proxy
        (
            "127.0.0.1",
            ["198.51.100.9, 203.0.113.5, 10.1.2.3"],
            "203.0.113.5",
        ),  # the client's own header skipped
        ("127.0.0.1", ["203.0.113.5", "10.1.2.3"], "203.0.113.5"),  # the header sent twice
        ("192.0.2.44", ["203.0.113.5"], "192.0.2.44"),  # an untrusted peer: header ignored
        ("127.0.0.1", [], "127.0.0.1"),  # a trusted proxy that named no one
        ("127.0.0.1", ["not-an-address"], "127.0.0.1"),  # unreadable: names no one
        ("127.0.0.1", ["10.9.9.9, 10.1.1.1"], "10.9.9.9"),  # every hop a proxy: the farthest known
        ("::1", ["2001:db8::7"], "::1"),  # IPv6 loopback is not in the list
    ],
)
def test_the_client_is_the_first_untrusted_hop_from_the_right(
    peer: str, forwarded: list[str], client: str
) -> None:
    assert client_address(peer, forwarded, PROXIES) == client


def test_without_trusted_proxies_the_header_is_never_read() -> None:
    assert client_address("127.0.0.1", ["203.0.113.5"], ()) == "127.0.0.1"


def test_a_bad_trusted_proxy_is_named_at_start() -> None:
    with pytest.raises(ValueError, match="CRAG_TRUSTED_PROXIES: 'front-door' is not an IP address"):
        BotSettings(CRAG_TRUSTED_PROXIES="10.0.0.0/8, front-door")


async def forwarded_statuses(directline: FakeTokenService, **settings: str) -> list[int]:  # noqa: F811
    async with webchat_app(
        DIRECT_LINE_SECRET=SECRET,
        DIRECT_LINE_ENDPOINT=directline.url,
        WEBCHAT_TOKENS_PER_MINUTE=2,
        **settings,
    ) as h:
        statuses = []
        for client in ("203.0.113.5", "203.0.113.5", "203.0.113.5", "198.51.100.7"):
            response = await h.client.post("/api/directline/token", headers={"X-Forwarded-For": client})
            statuses.append(response.status)
        return statuses


async def test_behind_a_trusted_proxy_each_client_has_its_own_token_limit(
    directline: FakeTokenService,  # noqa: F811
) -> None:
    assert await forwarded_statuses(directline, CRAG_TRUSTED_PROXIES="127.0.0.1") == [200, 200, 429, 200]


async def test_a_forwarded_address_from_an_untrusted_peer_is_ignored(
    directline: FakeTokenService,  # noqa: F811
) -> None:
    # The test client is the peer (127.0.0.1) and is not trusted: everyone shares its bucket.
    assert await forwarded_statuses(directline) == [200, 200, 429, 429]
