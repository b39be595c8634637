"""Microsoft Graph as the managed identity (GRAPH_AUTH=managed_identity, as the indexing job in
Azure runs): the token comes from the managed-identity endpoint (the fake on 127.0.0.1,
azure-identity's own credential), no client secret is asked for or sent to the authority."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.config.engine_settings import CragSettings
from crag.providers.graph.client import GraphClient, GraphError
from crag.providers.graph.user_groups import GraphMembership
from tests.fakes.graph_fixtures import ALICE, GROUP_A, Graph
from tests.fakes.managed_identity import managed_identity

GRAPH = "https://graph.microsoft.com"


def _settings(graph: Graph, tmp_path: Path) -> CragSettings:
    return graph.settings(
        tmp_path,
        GRAPH_AUTH="managed_identity",
        GRAPH_TENANT_ID="",
        GRAPH_CLIENT_ID="",
        GRAPH_CLIENT_SECRET="",
    )


async def test_graph_calls_carry_the_managed_identity_s_token(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph.fake.groups[ALICE] = [GROUP_A]
    settings = _settings(graph, tmp_path)  # no tenant, client id or secret: nothing is missing
    assert settings.graph.configured and settings.graph.missing() == []
    with managed_identity(monkeypatch) as identity:
        graph.fake.accept(identity.token(GRAPH))
        async with GraphClient(settings.graph) as client:
            groups = await GraphMembership(client).groups_of(ALICE)
        assert groups == (GROUP_A,)
        assert identity.resources() == [GRAPH]  # the token asked for Graph's audience
    assert graph.fake.token_requests == 0  # the client-secret authority was never asked


async def test_a_token_graph_refuses_names_the_identity_not_a_secret(
    graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph.fake.groups[ALICE] = [GROUP_A]
    with managed_identity(monkeypatch):  # its token is not one this Graph takes
        async with GraphClient(_settings(graph, tmp_path).graph) as client:
            with pytest.raises(GraphError) as refused:
                await GraphMembership(client).groups_of(ALICE)
    assert refused.value.kind == "auth" and "HTTP 401" in str(refused.value)


def test_with_a_secret_the_three_settings_are_still_needed(graph: Graph, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="GRAPH_CLIENT_SECRET"):
        graph.settings(tmp_path, GRAPH_CLIENT_SECRET="")
