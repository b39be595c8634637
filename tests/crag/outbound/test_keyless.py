"""Keyless sign-in to Azure's data services, with tokens from azure-identity's own managed-identity
credential pointed at a fake token endpoint on 127.0.0.1 (tests/fakes/managed_identity.py).

- Azure AI Search (the fake, over TLS, its keys refused as `disableLocalAuth` does): every request
  carries a bearer token for the Search audience and no api-key.
- Blob Storage (Azurite over TLS with its OAuth check): the bot's conversation state and the vector
  cache's mirror write and read with the identity's token; a client without one is refused.
- Redis (a real redis-server) and PostgreSQL (a real server): the identity logs in with its object
  id or its role as the user and the token as the password; a wrong password is refused.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
import trustme
from azure.core.exceptions import HttpResponseError
from azure.storage.blob.aio import BlobServiceClient
from redis.exceptions import AuthenticationError

from bot.state.blob_state import BlobStateStorage
from crag.cache.answer_cache_redis import RedisAnswerCache
from crag.config.azure_search import AzureSearchConfig, AzureSearchSettings
from crag.config.engine_settings import CragSettings, StorageAccount
from crag.core.models import Branch, CragResult
from crag.ingest.azure_index import make_index_client
from crag.outbound.entra_tokens import POSTGRES_SCOPE, TokenPassword
from crag.retrieval.embed.blob_mirror import BlobMirror
from crag.retrieval.search.azure import AzureSearchRetriever, SearchUnavailable, make_search_client
from feedback.postgres_store import PostgresFeedbackStore
from tests.fakes.azure_search import FakeAzureSearch
from tests.fakes.managed_identity import FakeManagedIdentity, managed_identity
from tests.servers.azurite import AzuriteBlob
from tests.servers.postgres import PostgresServer
from tests.servers.redis import running_redis

SEARCH = "https://search.azure.com"
STORAGE = "https://storage.azure.com"
REDIS = "https://redis.azure.com"
POSTGRES = "https://ossrdbms-aad.database.windows.net"


@pytest.fixture
def identity(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeManagedIdentity]:
    with managed_identity(monkeypatch) as fake:
        yield fake


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path, Path, Path]:
    """A test CA and a 127.0.0.1 certificate it signed: (CA, CA file, certificate file, key file)."""
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    for pem in cert.cert_chain_pems[1:]:
        pem.write_to_path(str(cert_file), append=True)
    cert.private_key_pem.write_to_path(str(key_file))
    return ca, ca_file, cert_file, key_file


# ---- Azure AI Search --------------------------------------------------------------------------------


async def test_search_sends_the_identity_s_bearer_token_and_no_key(
    identity: FakeManagedIdentity, tls: tuple[trustme.CA, Path, Path, Path]
) -> None:
    ca, ca_file, _, _ = tls
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    service = FakeAzureSearch()
    service.local_auth = False  # disableLocalAuth: true
    service.bearer_check = lambda token: identity.valid(token, SEARCH)
    url = await service.start(context)
    try:
        config = AzureSearchSettings(AZURE_SEARCH_ENDPOINT=url, AZURE_SEARCH_INDEX="hr").config()
        assert not config.api_key.get_secret_value()  # no key set: Entra
        indexes = make_index_client(config, connection_verify=str(ca_file))
        try:
            from crag.ingest.azure_index import ensure_index

            await ensure_index(config, indexes)
        finally:
            await indexes.close()
        service.add_documents(
            "hr", [{"id": "a1", "content": "annual leave carries over up to 20 days", "file": "leave.md"}]
        )
        retriever = AzureSearchRetriever(
            config, client=make_search_client(config, connection_verify=str(ca_file))
        )
        async with retriever:
            found = await retriever.search("annual leave", 5)
        assert [c.chunk.id for c in found] == ["a1"]
    finally:
        await service.stop()
    assert len(service.requests) >= 2
    for request in service.requests:
        assert "api-key" not in {h.lower() for h in request.headers}
        token = request.headers["Authorization"].removeprefix("Bearer ")
        assert identity.valid(token, SEARCH), request.path
    assert set(identity.resources()) == {SEARCH}


async def test_search_with_keys_off_refuses_a_key_with_a_message(
    tls: tuple[trustme.CA, Path, Path, Path],
) -> None:
    """The fake's keys-off mode is real: a key client is refused, as the service would refuse it."""
    service = FakeAzureSearch()
    service.local_auth = False
    url = await service.start()
    service.indexes["hr"] = {"name": "hr", "fields": [{"name": "id", "key": True, "type": "Edm.String"}]}
    service.documents["hr"] = {}
    config = AzureSearchConfig(endpoint=url, index_name="hr", api_key=service.api_key, retries=0)
    try:
        async with AzureSearchRetriever(config) as retriever:
            with pytest.raises(SearchUnavailable) as refused:
                await retriever.search("leave", 3)
    finally:
        await service.stop()
    assert refused.value.status_code == 403
    assert service.api_key not in str(refused.value)


# ---- Blob Storage -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def azurite_oauth(tls: tuple[trustme.CA, Path, Path, Path]) -> Iterator[AzuriteBlob]:
    _, _, cert_file, key_file = tls
    server = AzuriteBlob(tls=(cert_file, key_file))
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_conversation_state_in_blob_with_the_identity_s_token(
    identity: FakeManagedIdentity, azurite_oauth: AzuriteBlob, tls: tuple[trustme.CA, Path, Path, Path]
) -> None:
    ca_file = str(tls[1])
    settings = CragSettings(AZURE_STORAGE_ACCOUNT_URL=azurite_oauth.account_url)
    account = settings.storage_account()
    assert account is not None and account.keyless
    container = f"state-{uuid.uuid4().hex[:8]}"
    storage = BlobStateStorage(account, container, connection_verify=ca_file)
    try:
        await storage.write({"conv/1": {"turns": 3}})
        got = await storage.read(["conv/1"])
    finally:
        await storage.close()
    assert got["conv/1"]["turns"] == 3
    assert set(identity.resources()) == {STORAGE}

    # Azurite checks: without a token the same container is refused.
    anonymous = BlobServiceClient(azurite_oauth.account_url, connection_verify=ca_file)
    try:
        with pytest.raises(HttpResponseError) as refused:
            await anonymous.get_container_client(container).get_container_properties()
    finally:
        await anonymous.close()
    assert refused.value.status_code in (401, 403, 404)


def test_vector_cache_mirror_pushes_and_lists_with_the_identity_s_token(
    identity: FakeManagedIdentity, azurite_oauth: AzuriteBlob, tls: tuple[trustme.CA, Path, Path, Path]
) -> None:
    container = f"vectors-{uuid.uuid4().hex[:8]}"
    mirror = BlobMirror(
        StorageAccount(account_url=azurite_oauth.account_url), container, connection_verify=str(tls[1])
    )
    service = mirror._service
    service.create_container(container)
    service.get_container_client(container).upload_blob("m/a.keys", b"k")
    names = [b.name for b in service.get_container_client(container).list_blobs()]
    assert names == ["m/a.keys"]
    assert set(identity.resources()) == {STORAGE}


def test_blob_settings_need_an_account() -> None:
    with pytest.raises(ValueError, match="AZURE_STORAGE_ACCOUNT_URL"):
        CragSettings(CRAG_VECTOR_CACHE_BLOB_CONTAINER="vectors")
    with pytest.raises(ValueError, match="Blob endpoint"):
        CragSettings(AZURE_STORAGE_ACCOUNT_URL="storageacct")


# ---- Redis ------------------------------------------------------------------------------------------


def _answer() -> CragResult:
    return CragResult(question="q", language="en", branch=Branch.CORRECT, answer="Twenty days [1].")


async def test_redis_logs_in_as_the_identity_with_its_token(identity: FakeManagedIdentity) -> None:
    with running_redis(password="the-admin-password") as server:
        admin = aioredis.Redis(port=server.port, password="the-admin-password")
        user = identity.principal_id
        await admin.acl_setuser(
            user, enabled=True, passwords=[f"+{identity.token(REDIS)}"], keys=["*"], commands=["+@all"]
        )
        url = f"redis://{user}@127.0.0.1:{server.port}/0"
        cache = RedisAnswerCache.from_url(url, 60, lambda: "v1", timeout_s=2.0, auth="entra")
        try:
            await cache.put("How many days carry over?", [], _answer())
            got = await cache.get("How many days carry over?", [])
            whoami = await cache._client.acl_whoami()
        finally:
            await cache.close()
        assert got is not None and got.answer.startswith("Twenty days")
        assert (whoami.decode() if isinstance(whoami, bytes) else whoami) == user
        assert set(identity.resources()) == {REDIS}

        # Another password for the same user is refused: the token is what logs in.
        stranger = aioredis.Redis(port=server.port, username=user, password=identity.token(SEARCH))
        with pytest.raises(AuthenticationError):
            await stranger.ping()
        await stranger.aclose()
        await admin.aclose()


def test_redis_entra_url_names_the_user_and_holds_no_password() -> None:
    with pytest.raises(ValueError, match="object id"):
        RedisAnswerCache.from_url("rediss://cache.example:10000", 60, lambda: "", auth="entra")
    with pytest.raises(ValueError, match="must not hold a password"):
        RedisAnswerCache.from_url("rediss://u:secret@cache.example:10000", 60, lambda: "", auth="entra")


# ---- PostgreSQL -------------------------------------------------------------------------------------


async def test_postgres_logs_in_as_the_identity_s_role_with_its_token(
    identity: FakeManagedIdentity,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    role = f"bot_{uuid.uuid4().hex[:8]}"
    database = await postgres_server.create_database()
    admin = await asyncpg.connect(postgres_server.dsn(database))
    hba = postgres_server.data / "pg_hba.conf"
    before = hba.read_text()
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{identity.token(POSTGRES)}'")
        await admin.execute(
            f'GRANT ALL ON SCHEMA public TO {role}; GRANT ALL ON DATABASE "{database}" TO {role}'
        )
        # This role, and only it, must prove its password (the test server trusts everyone else).
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + before)
        await admin.execute("SELECT pg_reload_conf()")

        dsn = f"postgresql://{role}@127.0.0.1:{postgres_server.port}/{database}"
        store = PostgresFeedbackStore(dsn, tmp_path / "pending.jsonl", password=TokenPassword(POSTGRES_SCOPE))
        await store.open()
        try:
            rows = await store.feedback_rows()
            user = await store.pool.fetchval("SELECT current_user")
        finally:
            await store.close()
        assert rows == [] and user == role
        assert set(identity.resources()) == {POSTGRES}

        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(dsn, password=identity.token(SEARCH))
        with pytest.raises(ValueError, match="must not hold a password"):
            PostgresFeedbackStore(
                f"postgresql://{role}:pw@127.0.0.1/{database}",
                tmp_path / "p",
                password=TokenPassword(POSTGRES_SCOPE),
            )
    finally:
        hba.write_text(before)
        await admin.execute("SELECT pg_reload_conf()")
        await admin.close()
        await postgres_server.drop_database(database)
