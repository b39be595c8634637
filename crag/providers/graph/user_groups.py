"""A user's groups from Microsoft Graph: the MembershipSource (crag/core/access.py) of a company.

`GET /users/{id}/transitiveMemberOf/microsoft.graph.group?$select=id`: every group the user belongs
to, directly or through nested groups, and nothing else (the cast leaves out directory roles and
administrative units, which grant no access to documents). Followed page by page through
@odata.nextLink. Application permission: User.Read.All is the least privileged one that allows it
(GroupMember.Read.All or Directory.Read.All also do).
"""

from __future__ import annotations

import functools

from kiota_abstractions.base_request_configuration import RequestConfiguration
from msgraph.generated.users.item.transitive_member_of.graph_group.graph_group_request_builder import (
    GraphGroupRequestBuilder,
)

from crag.core.access import normalize
from crag.providers.graph.client import GraphClient, GraphError

PAGE_SIZE = 999  # the most Graph returns in one page of directory objects
MAX_PAGES = 100  # a bound on a malfunctioning server's endless next links (99,900 groups)


class GraphMembership:
    name = "graph"

    def __init__(self, client: GraphClient, page_size: int = PAGE_SIZE) -> None:
        self._client = client
        self._page_size = page_size

    async def close(self) -> None:
        """Release the Graph client's connections (the bot's shutdown)."""
        await self._client.close()

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        """The object ids of the user's groups (transitive), normalized. An unknown user is an empty
        tuple; anything else that fails raises GraphError."""
        builder = self._client.sdk.users.by_user_id(user_id).transitive_member_of.graph_group
        query = GraphGroupRequestBuilder.GraphGroupRequestBuilderGetQueryParameters(
            select=["id"], top=self._page_size
        )
        config = RequestConfiguration(query_parameters=query)
        groups: list[str] = []

        try:
            page = await self._client.call("reading a user's groups", lambda: builder.get(config))
            for _ in range(MAX_PAGES):
                if page is None:
                    break
                groups.extend(g.id for g in page.value or [] if g.id)
                if not page.odata_next_link:
                    break
                page = await self._client.call(
                    "reading a user's groups", functools.partial(builder.with_url(page.odata_next_link).get)
                )
            else:
                raise GraphError("reading a user's groups: too many pages", "unavailable")
        except GraphError as exc:
            if exc.kind == "not_found":
                return ()
            raise
        return normalize(groups)
