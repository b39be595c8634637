"""What a turn needs besides the activity: settings, the engine handle (crag/runtime/handle.py), feedback and
the document links; and, for the process, where its turn traces go (crag/tracing/export.py)."""

from __future__ import annotations

from crag.core.access import may_read
from crag.outbound.entra_tokens import POSTGRES_SCOPE, TokenPassword
from crag.runtime.factory import membership_source
from crag.runtime.handle import EngineHandle, IndexInfo
from crag.tracing.export import TracingExport, configure_tracing
from feedback.postgres_store import PostgresFeedbackStore
from feedback.protocol import Feedback
from feedback.sqlite_store import FeedbackStore
from hosting.app_settings import BotSettings
from hosting.asker import Askers
from hosting.doc_links import DocLinks


def make_feedback(settings: BotSettings) -> Feedback:
    """The one place that knows which feedback store the settings chose. A bad setting raises a
    ValueError that says what is wrong (never the DSN: it may hold a password)."""
    if settings.feedback_store == "postgres":
        return PostgresFeedbackStore(
            settings.postgres_url.get_secret_value(),
            settings.feedback_pending_path,
            pool_size=settings.postgres_pool_size,
            # Entra: the identity's token is the password (in Azure, password logins are off).
            password=TokenPassword(POSTGRES_SCOPE) if settings.postgres_auth == "entra" else None,
            migrate=settings.postgres_migrate,
        )
    return FeedbackStore(settings.feedback_db)


class BotRuntime:
    def __init__(self, settings: BotSettings) -> None:
        self.settings = settings
        self.feedback = make_feedback(settings)
        self.links = DocLinks.from_settings(
            self.docs_url,
            settings.app_id,
            settings.link_secret.get_secret_value(),
            settings.app_password.get_secret_value(),
            settings.link_ttl_hours,
        )
        self.handle = EngineHandle(settings, self.docs_url)
        self.askers = Askers(settings, membership_source(settings))
        self.tracing: TracingExport | None = None

    @property
    def docs_url(self) -> str:
        return self.settings.docs_url

    @property
    def index(self) -> IndexInfo:
        return self.handle.index

    @property
    def error(self) -> str:
        return self.handle.error

    @property
    def quarantined(self) -> list[str]:
        """Damaged feedback files moved aside on this start (the database or pending lines)."""
        return list(self.feedback.quarantined)

    async def may_open(self, rel: str, user: str) -> bool:
        """Whether /docs/ may give this indexed file to the user its link was made for: always with
        access trimming off; else only while that user (their groups now) may read it."""
        if not self.askers.trimming:
            return True
        reader = await self.askers.reader_of_user(user)
        return may_read(self.index.readers.get(rel), reader, self.askers.unknown_allowed)

    async def start(self) -> None:
        # Once per process: each worker (hosting/workers.py) starts its own app, and so its own exporter.
        self.tracing = configure_tracing(self.settings.tracing)
        await self.feedback.open()

    async def load_index(self) -> None:
        await self.handle.open()

    def status(self) -> tuple[int, dict[str, object]]:
        return self.handle.status()

    async def wait_ready(self, timeout: float) -> bool:
        return await self.handle.wait_ready(timeout)

    async def close(self) -> None:
        await self.handle.close()
        await self.feedback.close()
        await self.askers.close()
        if self.tracing is not None:
            await self.tracing.close()  # exports the spans still queued
            self.tracing = None
