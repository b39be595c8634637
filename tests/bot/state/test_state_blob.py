"""Conversation state in Azure Blob Storage (STATE_STORAGE=blob, botbuilder-azure 4.17.1) against a
real Azurite (tests/servers/azurite.py): the storage make_storage builds, its e_tag concurrency, the
SDK defects bot/state/blob_state.py works around, and a conversation carried between two bot instances."""

from __future__ import annotations

import gc
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob.aio import BlobServiceClient
from botbuilder.azure import BlobStorage, BlobStorageSettings
from botbuilder.core import ConversationState, StoreItem, TurnContext, UserState
from botbuilder.core.adapters import TestAdapter
from botbuilder.schema import Activity, ActivityTypes, ConversationAccount

from bot.bot_runtime import BotRuntime
from bot.crag_bot import CragBot
from bot.state.blob_state import BlobStateStorage, blob_name
from bot.state.storage import make_storage
from crag.config.engine_settings import StorageAccount
from crag.eval.loopback import serve_on_loopback
from hosting.app_settings import BotSettings
from tests.fakes.bot_connector import card_text
from tests.servers.azurite import ACCOUNT, ACCOUNT_KEY, AzuriteBlob


@pytest.fixture
def container() -> str:
    """Each test its own container, which does not exist yet."""
    return f"state-{uuid.uuid4().hex[:12]}"


def _settings(connection_string: str, container: str, **env: str) -> BotSettings:
    return BotSettings(
        STATE_STORAGE="blob",
        AZURE_STORAGE_CONNECTION_STRING=connection_string,
        AZURE_STORAGE_CONTAINER=container,
        **env,
    )


@pytest.fixture
async def storage(azurite: AzuriteBlob, container: str) -> AsyncIterator[BlobStateStorage]:
    made = make_storage(_settings(azurite.connection_string, container))
    assert isinstance(made, BlobStateStorage) and isinstance(made, BlobStorage)
    yield made
    await made.close()


async def _containers(azurite: AzuriteBlob) -> list[str]:
    async with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        return [c.name async for c in service.list_containers()]


async def test_write_read_delete_in_a_container_created_on_first_use(
    azurite: AzuriteBlob, container: str, storage: BlobStateStorage
) -> None:
    assert container not in await _containers(azurite)
    assert await storage.read(["nothing/yet"]) == {}
    assert container in await _containers(azurite)

    await storage.write({"conv/1": {"history": [{"question": "有給休暇は何日？"}]}, "user/1": {"n": 1}})
    items = await storage.read(["conv/1", "user/1", "conv/2"])
    assert set(items) == {"conv/1", "user/1"}
    assert items["conv/1"]["history"] == [{"question": "有給休暇は何日？"}]
    assert items["conv/1"]["e_tag"]  # the blob's ETag, for the next conditional write

    await storage.delete(["conv/1", "never/written"])  # deleting what is gone is no error
    assert set(await storage.read(["conv/1", "user/1"])) == {"user/1"}
    assert await storage.read([]) == {}  # the SDK's BlobStorage raises on no keys


async def test_e_tags_make_writes_conditional(storage: BlobStateStorage) -> None:
    await storage.write({"k": {"v": 1}})
    first = (await storage.read(["k"]))["k"]
    await storage.write({"k": {"v": 2, "e_tag": first["e_tag"]}})  # unchanged since read: accepted
    second = (await storage.read(["k"]))["k"]
    assert second["v"] == 2 and second["e_tag"] != first["e_tag"]

    # Changed since read: refused (the service's 412, which azure-storage-blob 12.7.0 reports as
    # ResourceExistsError), and the stored value stays.
    with pytest.raises(ResourceExistsError):
        await storage.write({"k": {"v": 3, "e_tag": first["e_tag"]}})
    assert (await storage.read(["k"]))["k"]["v"] == 2
    # An e_tag for a blob that does not exist is refused as well.
    with pytest.raises(ResourceExistsError):
        await storage.write({"new": {"v": 1, "e_tag": first["e_tag"]}})
    assert await storage.read(["new"]) == {}
    # "*" and no e_tag at all overwrite unconditionally (last writer wins).
    await storage.write({"k": {"v": 4, "e_tag": "*"}})
    await storage.write({"k": {"v": 5}})
    assert (await storage.read(["k"]))["k"]["v"] == 5


class _Counter(StoreItem):  # type: ignore[misc]
    """A state object, stored by jsonpickle with its class and read back as one."""

    def __init__(self, count: int = 0) -> None:
        super().__init__()
        self.count = count


async def test_two_instances_saving_one_conversation_at_once(azurite: AzuriteBlob, container: str) -> None:
    """Two bot instances load the same conversation, both change it, both save: once the state
    exists the first save wins and the second raises (that turn's error handler answers)."""
    one = make_storage(_settings(azurite.connection_string, container))
    two = make_storage(_settings(azurite.connection_string, container))
    assert isinstance(one, BlobStateStorage) and isinstance(two, BlobStateStorage)
    try:
        state_one, state_two = ConversationState(one), ConversationState(two)
        counter_one = state_one.create_property("counter")
        counter_two = state_two.create_property("counter")
        adapter = TestAdapter()
        activity = Activity(
            type=ActivityTypes.message,
            text="hi",
            channel_id="msteams",
            conversation=ConversationAccount(id="19:meeting@thread.v2"),
        )

        async def both_add(one_adds: int, two_adds: int) -> tuple[TurnContext, TurnContext]:
            """Both instances load the conversation, then each adds to its counter."""
            turn_one, turn_two = TurnContext(adapter, activity), TurnContext(adapter, activity)
            await state_one.load(turn_one, force=True)
            await state_two.load(turn_two, force=True)
            (await counter_one.get(turn_one, _Counter)).count += one_adds
            (await counter_two.get(turn_two, _Counter)).count += two_adds
            return turn_one, turn_two

        async def stored_count() -> int:
            turn = TurnContext(adapter, activity)
            await state_two.load(turn, force=True)
            counter = await counter_two.get(turn, _Counter)
            assert isinstance(counter, _Counter)
            return int(counter.count)

        # A conversation's first state has no e_tag: both saves overwrite, the later one wins.
        turn_one, turn_two = await both_add(1, 10)
        await state_one.save_changes(turn_one)
        await state_two.save_changes(turn_two)
        assert await stored_count() == 10

        # From then on the read carries the e_tag: the later save is refused.
        turn_one, turn_two = await both_add(1, 100)
        await state_one.save_changes(turn_one)
        with pytest.raises(ResourceExistsError):
            await state_two.save_changes(turn_two)
        assert await stored_count() == 11
    finally:
        await one.close()
        await two.close()


async def test_keys_are_escaped_into_distinct_blob_names(
    azurite: AzuriteBlob, container: str, storage: BlobStateStorage
) -> None:
    keys = [
        "msteams/conversations/19:abc@thread.tacv2;messageid=1/",
        "emulator/conversations/a b?c#d%e/users/x",
        "a/../b",
        "b",
        "trailing.",
        "日本語/キー",
        "k" * 2000,
    ]
    await storage.write({key: {"key": key} for key in keys})
    items = await storage.read(keys)
    assert {key: item["key"] for key, item in items.items()} == {key: key for key in keys}
    assert len({blob_name(key) for key in keys}) == len(keys)

    # The defect worked around: the SDK's own BlobStorage puts "a/../b" in the URL as it is.
    stock = BlobStorage(BlobStorageSettings(container, connection_string=azurite.connection_string))
    with pytest.raises(HttpResponseError):
        await stock.write({"a/../b": {"key": "a/../b"}})


async def _blob_service(read: Callable[[web.Request], Awaitable[web.Response]]) -> tuple[web.AppRunner, str]:
    """A Blob endpoint on loopback that creates any container and answers every read with `read`;
    its connection string."""

    async def created(request: web.Request) -> web.Response:
        return web.Response(status=201)

    app = web.Application()
    app.router.add_put("/{account}/{container}", created)
    app.router.add_get("/{account}/{container}/{blob:.+}", read)
    runner, url = await serve_on_loopback(app)
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={url}/{ACCOUNT};"
    )
    return runner, connection


async def test_a_storage_error_is_not_read_as_no_state() -> None:
    """A 403 (say, a rotated key) on reading: the SDK's BlobStorage returns no state, so the turn
    would start the conversation afresh and overwrite its history; ours fails the turn instead."""

    async def forbidden(request: web.Request) -> web.Response:
        body = '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationFailure</Code></Error>'
        return web.Response(
            status=403,
            text=body,
            content_type="application/xml",
            headers={"x-ms-error-code": "AuthorizationFailure"},
        )

    runner, connection = await _blob_service(forbidden)
    settings = BlobStorageSettings("state", connection_string=connection)
    stock, ours = BlobStorage(settings), BlobStateStorage(StorageAccount(connection), "state")
    try:
        assert await stock.read(["conv/1"]) == {}  # the defect
        with pytest.raises(HttpResponseError) as error:
            await ours.read(["conv/1"])
        assert error.value.status_code == 403
    finally:
        await ours.close()
        await runner.cleanup()


async def test_botbuilder_azure_417_leaves_its_http_session_open() -> None:
    """The SDK's BlobStorage keeps no service client and has no close: its HTTP session is left for
    the garbage collector ("Unclosed client session"). Ours closes it."""

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, headers={"x-ms-error-code": "BlobNotFound"})

    runner, connection = await _blob_service(missing)
    try:
        stock = BlobStorage(BlobStorageSettings("state", connection_string=connection))
        assert await stock.read(["conv/1"]) == {} and not hasattr(stock, "close")
        with pytest.warns(ResourceWarning, match="Unclosed client session"):
            del stock
            gc.collect()
        ours = BlobStateStorage(StorageAccount(connection), "state")
        assert await ours.read(["conv/1"]) == {}
        await ours.close()
        with warnings.catch_warnings(record=True) as left:
            warnings.simplefilter("always")
            del ours
            gc.collect()
        assert not [w for w in left if issubclass(w.category, ResourceWarning)]
    finally:
        await runner.cleanup()


def test_the_sdk_still_uses_the_client_attribute_replaced() -> None:
    """BlobStateStorage hands the base class its own container client by the mangled name."""
    for method in (BlobStorage.write, BlobStorage.delete, BlobStorage._initialize):
        assert "_BlobStorage__container_client" in method.__code__.co_names
    # Its constructor is not called (it takes keys only): the flag it sets is set by ours.
    assert "_BlobStorage__initialized" in BlobStorage._initialize.__code__.co_names


DOCS = {
    "leave.md": """# 休暇規程

## 年次有給休暇の繰越し

未使用の年次有給休暇は翌年度に限り最大20日まで繰り越すことができる。繰越分は2年で消滅する。
""",
}


async def say(adapter: TestAdapter, text: str) -> list[Activity]:
    await adapter.receive_activity(Activity(type=ActivityTypes.message, text=text, locale="ja-JP"))
    out = []
    while (activity := adapter.get_next_activity()) is not None:
        if activity.type == ActivityTypes.message:
            out.append(activity)
    return out


def _card(activity: Activity) -> str:
    assert activity.attachments, activity
    content: dict[str, Any] = activity.attachments[0].content
    return card_text(content)


async def test_a_conversation_goes_on_on_another_instance(
    tmp_path: Path, azurite: AzuriteBlob, container: str
) -> None:
    """The question asked on instance A is the history the follow-up on instance B leans on: two
    CragBots, each with its own storage from make_storage, one Azurite container."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    settings = _settings(
        azurite.connection_string,
        container,
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(tmp_path / "index"),
        CRAG_FEEDBACK_DB=str(tmp_path / "feedback.sqlite3"),
        CRAG_EMBEDDINGS="off",
        CRAG_WEB="off",
    )
    runtime = BotRuntime(settings)
    await runtime.start()
    await runtime.load_index()
    storages = [make_storage(settings) for _ in range(2)]

    def instance(storage: Any) -> TestAdapter:
        return TestAdapter(CragBot(runtime, ConversationState(storage), UserState(storage)).on_turn)

    try:
        a, b = (instance(s) for s in storages)
        await say(a, "有給休暇の繰越しは何日まで？")
        [followup] = await say(b, "その繰越分はいつ消滅しますか？")
        assert "有給" in _card(followup) and "2年" in _card(followup)

        # The history is in the container, under the conversation's key.
        key = f"{a.template.channel_id}/conversations/{a.template.conversation.id}"
        stored = await storages[0].read([key])
        assert "有給休暇の繰越しは何日まで？" in str(stored[key])

        # Without that history (another container) the same follow-up is read alone.
        other = make_storage(_settings(azurite.connection_string, container + "-other"))
        storages.append(other)
        [alone] = await say(instance(other), "その繰越分はいつ消滅しますか？")
        assert _card(alone) != _card(followup)
    finally:
        for storage in storages:
            await storage.close()
        await runtime.close()


@pytest.mark.parametrize("name", ["Bot_State", "ab", "a--b", "-state", "x" * 64])
def test_a_container_name_azure_refuses_is_refused_at_start(name: str) -> None:
    # Otherwise every turn fails with "InvalidResourceName" on first use.
    with pytest.raises(ValueError, match="AZURE_STORAGE_CONTAINER"):
        BotSettings(STATE_STORAGE="blob", AZURE_STORAGE_CONTAINER=name)
