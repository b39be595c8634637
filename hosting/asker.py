"""Who asks: the reader a turn's answer is trimmed to (access trimming, crag/core/access.py).

With CRAG_ACCESS_TRIMMING off there is no reader: every document is everyone's, as before. With it
on, the asker is the Teams user of the activity (`from.aadObjectId`, their Entra object id), with
the groups their MembershipSource gives. That id is believed only where nobody can forge it:
activities of the Teams channel, on a bot that authenticates its requests (an app id) or that only
this machine can reach (local mode). Everyone else (the Emulator, Web Chat, a malformed id) reads
only what everyone may read. In a channel or group chat every member sees the answer, so it comes
from documents everyone may read, unless CRAG_ACCESS_SHARED_CHATS=asker.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from botbuilder.schema import Activity

from crag.access.membership import reader_for
from crag.core.access import MembershipSource, Reader, reader_of
from hosting.app_settings import BotSettings
from hosting.logsafe import esc

log = logging.getLogger(__name__)

# Entra object ids are GUIDs; anything else in aadObjectId is not one.
_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
SHARED_CONVERSATIONS = ("channel", "groupChat")


@dataclass(frozen=True)
class Asker:
    reader: Reader | None  # None: trimming off
    link_user: str = ""  # whose permissions the card's document links carry ("" : everyone's)


class Askers:
    def __init__(self, settings: BotSettings, membership: MembershipSource | None) -> None:
        self.trimming = settings.access_trimming
        self.unknown_allowed = settings.access_unknown == "allow"
        # Ids are believed when the Bot Framework authenticated the request, or when only this
        # machine can reach the bot.
        self._trust_ids = bool(settings.app_id) or not settings.allow_remote_unauthenticated
        self._shared = settings.access_shared_chats
        self._membership = membership
        if self.trimming and not self._trust_ids:
            log.warning(
                "access trimming without an app id on a bot others can reach: no asker can be "
                "identified, so every answer comes from documents everyone may read"
            )

    async def close(self) -> None:
        """Release the membership source's connections (Microsoft Graph)."""
        close = getattr(self._membership, "close", None)
        if close is not None:
            await close()

    async def asker(self, activity: Activity) -> Asker:
        if not self.trimming:
            return Asker(None)
        kind = activity.conversation.conversation_type if activity.conversation else None
        if kind in SHARED_CONVERSATIONS and self._shared == "everyone":
            return Asker(reader_of(None))
        user = self.user_id(activity)
        return Asker(await reader_for(user, self._membership), user or "")

    def user_id(self, activity: Activity) -> str | None:
        """The asker's Entra object id, when the activity's can be believed."""
        account = activity.from_property
        aad = getattr(account, "aad_object_id", None) if account is not None else None
        if not aad or activity.channel_id != "msteams" or not self._trust_ids:
            return None
        return self._checked(aad)

    async def reader_of_user(self, user_id: str) -> Reader:
        """The reader of the user a document link was made for ("" or a bad id: only EVERYONE)."""
        user = self._checked(user_id) if user_id and self._trust_ids else None
        return await reader_for(user, self._membership)

    @staticmethod
    def _checked(aad: object) -> str | None:
        if not isinstance(aad, str) or not _OBJECT_ID.match(aad):
            log.warning("ignored an aadObjectId that is not an object id: %s", esc(aad, 60))
            return None
        return aad.lower()
