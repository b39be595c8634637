"""The shared vector cache's copy in a Blob container (CRAG_VECTOR_CACHE_BLOB_CONTAINER,
crag/retrieval/embed/blob_mirror.py), against a real Azurite (tests/servers/azurite.py): a machine
that builds pushes its shards, another machine with an empty cache pulls them and embeds nothing, a
shard compacted away is not pulled again, another model's shards stay up there, an unreachable
endpoint costs seconds and a warning, and no log line holds the connection string."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from azure.storage.blob import BlobServiceClient

from crag.config.engine_settings import CragSettings, StorageAccount
from crag.core.models import Chunk
from crag.retrieval.embed import blob_mirror as blob_mirror_module
from crag.retrieval.embed import store
from crag.retrieval.embed.blob_mirror import BlobMirror
from crag.retrieval.embed.index_vectors import IndexVectors
from crag.retrieval.embed.store import KEYS_FILE, VECTORS_FILE, SharedCache, text_key
from crag.retrieval.search.embedder_choice import vector_cache_mirror
from tests.crag.retrieval.embed.test_vectors_at_scale import TopicEmbedder, _chunks
from tests.servers.azurite import ACCOUNT, ACCOUNT_KEY, AzuriteBlob
from tests.servers.harness import free_port

MODEL = TopicEmbedder.name  # "topic-embedder": its cache folder and its Blob folder


@pytest.fixture
def container() -> str:
    """Each test its own container, which does not exist yet."""
    return f"vectors-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every log record, the Azure SDK's debug lines included."""
    caplog.set_level(logging.DEBUG)
    return caplog


def _mirror(connection_string: str, container: str) -> BlobMirror:
    return BlobMirror(StorageAccount(connection_string), container)


def _no_secret_in(logs: pytest.LogCaptureFixture, connection_string: str) -> None:
    for record in logs.records:
        text = f"{record.getMessage()} {record.exc_text or ''}"
        assert ACCOUNT_KEY not in text and connection_string not in text, record.name


def _blobs(azurite: AzuriteBlob, container: str) -> list[str]:
    with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        return sorted(b.name for b in service.get_container_client(container).list_blobs())


def _build(
    chunks: list[Chunk], embedder: TopicEmbedder, cache: Path, mirror: BlobMirror | None
) -> IndexVectors:
    vectors = IndexVectors(chunks, embedder, None, cache, mirror)
    asyncio.run(vectors.build())
    assert vectors.ready
    return vectors


def _shard_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.vectors.*") if ".tmp-" not in p.name)


def _rows(n: int, start: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(start)
    return {
        text_key(MODEL, f"text {i}"): rng.normal(size=8).astype(np.float16) for i in range(start, start + n)
    }


class CountingMirror(BlobMirror):
    """A BlobMirror that counts the shards it downloads and uploads."""

    downloaded = 0
    uploaded = 0

    def _download(self, folder: Path, prefix: str) -> None:
        super()._download(folder, prefix)
        self.downloaded += 1

    def _upload(self, folder: Path, prefix: str) -> None:
        super()._upload(folder, prefix)
        self.uploaded += 1


# ---- two machines, one container ----------------------------------------------------------------


def test_a_second_machine_pulls_the_vectors_and_embeds_nothing(
    azurite: AzuriteBlob, container: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    chunks = _chunks(40)
    settings = CragSettings(
        CRAG_VECTOR_CACHE=str(tmp_path / "a"),
        CRAG_VECTOR_CACHE_BLOB_CONTAINER=container,
        AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string,
    )
    mirror_a = vector_cache_mirror(settings)  # the wiring point's mirror (one per process and container)
    assert isinstance(mirror_a, BlobMirror) and vector_cache_mirror(settings) is mirror_a

    embedder_a = TopicEmbedder()
    built_a = _build(chunks, embedder_a, tmp_path / "a", mirror_a)
    assert embedder_a.embedded == built_a.total > 40
    # The container was created by the first push; the shard went up as it was written.
    local_a = _shard_files(tmp_path / "a" / MODEL)
    assert local_a and _blobs(azurite, container) == [f"{MODEL}/{name}" for name in local_a]

    # Machine B: an empty cache folder, the same container (a new process: a mirror of its own).
    embedder_b = TopicEmbedder()
    mirror_b = CountingMirror(StorageAccount(azurite.connection_string), container)
    built_b = _build(chunks, embedder_b, tmp_path / "b", mirror_b)
    assert embedder_b.embedded == 0 and built_b.embedded == 0
    assert mirror_b.downloaded == len(local_a) // 2
    assert mirror_b.uploaded == 0  # what came down does not go up again
    assert built_a.chunk_matrix is not None and built_b.chunk_matrix is not None
    assert np.array_equal(built_a.chunk_matrix, built_b.chunk_matrix)
    assert built_a._sentence_matrix is not None and built_b._sentence_matrix is not None
    assert np.array_equal(built_a._sentence_matrix, built_b._sentence_matrix)
    for name in local_a:  # byte for byte the shards A wrote
        assert (tmp_path / "b" / MODEL / name).read_bytes() == (tmp_path / "a" / MODEL / name).read_bytes()
    assert any("shards pulled from Blob container" in r.getMessage() for r in logs.records)
    assert not [r for r in logs.records if r.levelno >= logging.WARNING]

    # B asks again in the same process: nothing is listed or downloaded twice.
    again = TopicEmbedder()
    _build(_chunks(41), again, tmp_path / "b", mirror_b)
    assert mirror_b.downloaded == len(local_a) // 2
    assert again.embedded > 0  # the new chunk's texts, pushed in turn
    assert mirror_b.uploaded == 1
    assert len(_blobs(azurite, container)) == len(local_a) + 2
    _no_secret_in(logs, azurite.connection_string)


def test_a_shard_compacted_away_is_not_pulled_again(
    azurite: AzuriteBlob, container: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    rows = {}
    cache_a = SharedCache(tmp_path / "a", MODEL, _mirror(azurite.connection_string, container))
    for i in range(30):  # 30 writes: A compacts past 24 shards, and keeps its merged shard local
        batch = _rows(2, start=2 * i)
        cache_a.add(batch)
        rows.update(batch)
    blobs = _blobs(azurite, container)
    assert len(blobs) == 60 and not [b for b in blobs if "merged" in b]
    assert [s for s in cache_a._shards() if "merged" in s]

    # B pulls the 30 shards, then compacts them into one: the cache reads one shard, not 30.
    mirror_b = CountingMirror(StorageAccount(azurite.connection_string), container)
    cache_b = SharedCache(tmp_path / "b", MODEL, mirror_b)
    got = cache_b.load(rows)
    assert mirror_b.downloaded == 30 and mirror_b.uploaded == 0  # nor the merged shard
    assert got.keys() == rows.keys() and all(np.array_equal(got[k], rows[k]) for k in rows)
    merged = cache_b._shards()
    assert len(merged) == 1 and merged[0].endswith("-merged.")

    # B restarts (a new process, a new mirror): the 30 compacted shards are not downloaded again.
    restarted = CountingMirror(StorageAccount(azurite.connection_string), container)
    cache_b = SharedCache(tmp_path / "b", MODEL, restarted)
    assert cache_b.load(rows).keys() == rows.keys()
    assert restarted.downloaded == 0 and restarted.uploaded == 0 and cache_b._shards() == merged

    # A writes one more shard: the next process on B pulls that one only.
    cache_a.add(_rows(1, start=100))
    later = CountingMirror(StorageAccount(azurite.connection_string), container)
    assert len(SharedCache(tmp_path / "b", MODEL, later).load(_rows(1, start=100))) == 1
    assert later.downloaded == 1
    _no_secret_in(logs, azurite.connection_string)


def test_another_models_shards_are_not_pulled(azurite: AzuriteBlob, container: str, tmp_path: Path) -> None:
    chunks = _chunks(10)
    _build(chunks, TopicEmbedder(), tmp_path / "a", _mirror(azurite.connection_string, container))

    class OtherModel(TopicEmbedder):
        name = f"{MODEL}-v2"  # its Blob folder's name starts with the first model's

    mirror_b = CountingMirror(StorageAccount(azurite.connection_string), container)
    other = OtherModel()
    _build(chunks, other, tmp_path / "b", mirror_b)
    assert mirror_b.downloaded == 0 and other.embedded > 0
    assert not (tmp_path / "b" / MODEL).exists()
    names = _blobs(azurite, container)
    assert {n.split("/")[0] for n in names} == {MODEL, f"{MODEL}-v2"}  # each model its own folder


def test_a_cache_made_before_the_mirror_goes_up_the_first_time(
    azurite: AzuriteBlob, container: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine whose cache predates the setting (merged shard included) uploads it once, when a
    build first reads the cache with the mirror on; another machine then embeds nothing."""
    monkeypatch.setattr(store, "_MAX_SHARDS", 3)
    chunks = _chunks(30)
    for part in range(5):  # five builds over growing parts, no mirror: compacted locally
        _build(chunks[: 6 * (part + 1)], TopicEmbedder(), tmp_path / "a", None)
    before = SharedCache(tmp_path / "a", MODEL)._shards()
    assert any("merged" in s for s in before)

    _build(_chunks(31), TopicEmbedder(), tmp_path / "a", _mirror(azurite.connection_string, container))
    pushed = {
        n.split("/")[1].removesuffix(KEYS_FILE) for n in _blobs(azurite, container) if n.endswith(KEYS_FILE)
    }
    assert set(before) <= pushed

    embedder_b = TopicEmbedder()
    _build(_chunks(31), embedder_b, tmp_path / "b", _mirror(azurite.connection_string, container))
    assert embedder_b.embedded == 0


def test_shards_written_while_blob_rests_go_up_later(
    azurite: AzuriteBlob, container: str, tmp_path: Path
) -> None:
    """After a failure the mirror rests; the shards written meanwhile (and a merged shard holding
    rows that never went up) are pushed with the next shard once it is back."""
    mirror = _mirror(azurite.connection_string, container)
    cache = SharedCache(tmp_path / "a", MODEL, mirror)
    cache.add(_rows(1, start=0))
    mirror._resting_until = time.monotonic() + 3600
    cache.add(_rows(1, start=1))
    assert len(_blobs(azurite, container)) == 2
    mirror._resting_until = 0.0
    cache.add(_rows(1, start=2))
    assert len(_blobs(azurite, container)) == 6

    mirror._resting_until = time.monotonic() + 3600
    for i in range(3, 30):
        cache.add(_rows(1, start=i))  # compacted at 25 shards, while nothing went up
    mirror._resting_until = 0.0
    cache.add(_rows(1, start=30))
    uploaded = _blobs(azurite, container)
    assert any("merged" in n for n in uploaded)  # it holds rows that are nowhere else
    every = {k: v for i in range(31) for k, v in _rows(1, start=i).items()}
    got = SharedCache(tmp_path / "b", MODEL, _mirror(azurite.connection_string, container)).load(every)
    assert got.keys() == every.keys()


# ---- without a reachable Blob service -------------------------------------------------------------


def test_an_unreachable_endpoint_costs_seconds_and_a_warning(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
    )
    mirror = _mirror(connection, "vectors")
    embedder = TopicEmbedder()
    started = time.monotonic()
    built = _build(_chunks(20), embedder, tmp_path / "a", mirror)
    assert time.monotonic() - started < 10  # a refused connection: three tries about 1 s apart
    assert embedder.embedded == built.total > 0
    warnings = [r.getMessage() for r in logs.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # then it rests: the push after the build does not try again
    assert "Blob container vectors" in warnings[0] and "failed" in warnings[0]
    assert "ServiceRequestError" in warnings[0]

    # The local cache works as before: a new index over the same texts embeds nothing.
    again = TopicEmbedder()
    _build(_chunks(20), again, tmp_path / "a", mirror)
    assert again.embedded == 0
    _no_secret_in(logs, connection)


def test_an_endpoint_that_never_answers_costs_its_read_timeouts(
    tmp_path: Path, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listening socket nobody reads (the kernel accepts the connection, no reply ever comes): each
    try ends at the read timeout, 1 s here (10 s by default), and the build goes on."""
    monkeypatch.setattr(blob_mirror_module, "READ_TIMEOUT", 1.0)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
        )
        embedder = TopicEmbedder()
        started = time.monotonic()
        built = _build(_chunks(10), embedder, tmp_path / "a", _mirror(connection, "vectors"))
        elapsed = time.monotonic() - started
    assert elapsed < 10, elapsed  # three tries of 1 s and two waits of about 1 s
    assert embedder.embedded == built.total > 0
    warnings = [r.getMessage() for r in logs.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "listing topic-embedder/ failed" in warnings[0], warnings
    _no_secret_in(logs, connection)


def test_a_malformed_connection_string_is_a_warning_without_it(logs: pytest.LogCaptureFixture) -> None:
    secret = "AccountKey=not-a-real-key-but-secret;nonsense"
    settings = CragSettings(
        CRAG_VECTOR_CACHE_BLOB_CONTAINER="vectors", AZURE_STORAGE_CONNECTION_STRING=secret
    )
    assert vector_cache_mirror(settings) is None
    warnings = [r.getMessage() for r in logs.records if r.levelno >= logging.WARNING]
    assert (
        len(warnings) == 1
        and "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL is not usable" in warnings[0]
    )
    _no_secret_in(logs, secret)
    assert "not-a-real-key" not in logs.text


# ---- settings -----------------------------------------------------------------------------------


def test_the_settings_say_what_is_missing() -> None:
    with pytest.raises(
        ValueError, match="CRAG_VECTOR_CACHE_BLOB_CONTAINER needs AZURE_STORAGE_CONNECTION_STRING"
    ):
        CragSettings(CRAG_VECTOR_CACHE_BLOB_CONTAINER="vectors", AZURE_STORAGE_CONNECTION_STRING="")
    with pytest.raises(ValueError, match="not a Blob container name"):
        CragSettings(CRAG_VECTOR_CACHE_BLOB_CONTAINER="Vectors_1", AZURE_STORAGE_CONNECTION_STRING="x")
    with pytest.raises(ValueError, match="needs the local cache"):
        CragSettings(
            CRAG_VECTOR_CACHE_BLOB_CONTAINER="vectors",
            AZURE_STORAGE_CONNECTION_STRING="x",
            CRAG_VECTOR_CACHE="",
        )
    # Not set: no mirror, whatever the connection string (the bot's Blob state may use it alone).
    settings = CragSettings(CRAG_VECTOR_CACHE_BLOB_CONTAINER="", AZURE_STORAGE_CONNECTION_STRING="x")
    assert vector_cache_mirror(settings) is None


def test_the_bot_reads_the_same_connection_string() -> None:
    from hosting.app_settings import BotSettings

    settings = BotSettings(AZURE_STORAGE_CONNECTION_STRING="UseDevelopmentStorage=true")
    assert settings.azure_storage_connection_string.get_secret_value() == "UseDevelopmentStorage=true"
    assert list(BotSettings.model_fields).count("azure_storage_connection_string") == 1


def test_every_blob_file_name_is_a_shard_file() -> None:
    assert blob_mirror_module._PREFIX.match("1700000000000-0123abcd.")
    assert blob_mirror_module._PREFIX.match("1700000000000-merged.")
    assert not blob_mirror_module._PREFIX.match("../evil.")
    assert not blob_mirror_module._PREFIX.match("sub/1700000000000-0123abcd.")
    assert VECTORS_FILE.endswith(".npy") and KEYS_FILE.endswith(".json")
