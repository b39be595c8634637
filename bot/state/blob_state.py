"""Conversation state in Azure Blob Storage: botbuilder-azure 4.17's BlobStorage, with three of its
defects worked around, each shown on the SDK's own BlobStorage by a test of
tests/bot/state/test_state_blob.py (against Azurite, or a Blob endpoint of the test's own):

- Keys become blob names unescaped (its docstring says they are encoded; the JS and .NET SDKs do
  escape them): a conversation id holding "/../" is normalized away in the URL and the request
  fails to authenticate, and names ending in "." or "/" are ones Azure advises against. Here every
  key is percent-encoded into one flat blob name (test_keys_are_escaped_into_distinct_blob_names).
- `read` swallows every HTTP error that is not a 404: a 403 or a 5xx would read as "no state", the
  turn would start afresh and its save (no e_tag: overwrite) would wipe the conversation's history.
  Here only a missing blob is "no state"; any other error fails the turn
  (test_a_storage_error_is_not_read_as_no_state).
- Its BlobServiceClient is a local of its constructor, never closed, and its container client cannot
  close the shared transport ("Unclosed client session" at exit): here the service client is kept
  and `close` closes it (test_botbuilder_azure_417_leaves_its_http_session_open).

Optimistic concurrency is the SDK's: state read carries the blob's ETag as `e_tag`; a write with it
is conditional (If-Match) and, when the blob changed since, raises azure.core's ResourceExistsError
("The specified blob already exists": azure-storage-blob 12.7.0 turns the service's 412 into that
when overwrite is off). A write without e_tag, or with "*", overwrites. So two instances saving one
conversation's turn at the same time: the later save fails and that turn answers with the error
message, as MemoryStorage and SqliteStorage do.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob.aio import BlobServiceClient, ContainerClient
from botbuilder.azure import BlobStorage

from crag.config.engine_settings import StorageAccount
from crag.outbound.entra_tokens import async_credential

# Azure's limit on a blob name's length.
_MAX_NAME = 1024


def blob_name(key: str) -> str:
    """A storage key as one blob name: percent-encoded, "/" and "." included (no virtual folders, no
    dot segments, no trailing dot); hashed when longer than Azure allows."""
    name = quote(key, safe="").replace(".", "%2E")
    if len(name) > _MAX_NAME:
        name = "sha256-" + hashlib.sha256(key.encode()).hexdigest()
    return name


class BlobStateStorage(BlobStorage):  # type: ignore[misc]
    def __init__(self, account: StorageAccount, container: str, **transport: Any) -> None:
        """account: a connection string, or the Blob endpoint signed into with an Entra token (in Azure
        the account's shared keys are off). transport: azure-core options such as connection_verify."""
        if not container:
            raise ValueError("the Blob container's name is required (AZURE_STORAGE_CONTAINER)")
        # The base class's constructor is not called: it accepts a connection string or an account
        # key only, and would build a client of its own. It keeps two (name-mangled) attributes.
        if account.keyless:
            self._credential: AsyncTokenCredential | None = async_credential()
            self._service = BlobServiceClient(account.account_url, credential=self._credential, **transport)
        else:
            self._credential = None
            self._service = BlobServiceClient.from_connection_string(account.connection_string, **transport)
        self._container: ContainerClient = self._service.get_container_client(container)
        # The base class's write and delete use its private (name-mangled) container client: ours,
        # so that one closable session serves them all. botbuilder-azure is pinned (4.17.1), and
        # tests/bot/state/test_state_blob.py checks that the base class still reads these attributes.
        self._BlobStorage__container_client = self._container
        self._BlobStorage__initialized = False

    async def read(self, keys: list[str]) -> dict[str, Any]:
        if not keys:
            return {}
        await self._initialize()  # creates the container on first use
        items: dict[str, Any] = {}
        for key in keys:
            try:
                items[key] = await self._inner_read_blob(self._container.get_blob_client(blob_name(key)))
            except ResourceNotFoundError:
                continue
        return items

    async def write(self, changes: dict[str, Any]) -> None:
        await super().write({blob_name(key): value for key, value in (changes or {}).items()})

    async def delete(self, keys: list[str]) -> None:
        await super().delete([blob_name(key) for key in keys])

    async def close(self) -> None:
        await self._service.close()  # the transport (aiohttp session) every client of it shares
        if self._credential is not None:
            await self._credential.close()
