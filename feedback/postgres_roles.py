"""The bot's own PostgreSQL role: it reads and writes the feedback tables and nothing else.

In Azure the schema belongs to the migration role (the server's Entra administrator, used only by the
migration job), and the bot's managed identity logs in as a role that may not create, alter or drop
anything: a bug or an injected statement in the bot cannot change the schema or reach other data.
`grant_bot_role` runs after `migrate`, in the same job, so every new table is granted as it appears.

On Azure Database for PostgreSQL an Entra principal's role is made by the server's own function
(pgaadauth_create_principal_with_oid), which ties the role to the identity's object id; on a plain
server (local, tests) the role is an ordinary LOGIN role that the administrator gives a password.
"""

from __future__ import annotations

import logging
import re

import asyncpg

log = logging.getLogger(__name__)

# Every table the store reads or writes; schema_migrations only read (the version check at start).
FEEDBACK_TABLES = ("answers", "answer_feedback", "answer_messages", "unattributed_feedback")
# A PostgreSQL identifier we never need to quote: the role name is written into SQL text (GRANT
# takes no parameters), so anything else is refused rather than escaped.
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def check_role(role: str) -> str:
    if not _ROLE.match(role):
        raise ValueError(
            f"bot role {role!r}: use lower-case letters, digits and _ (at most 63, not starting with a digit)"
        )
    return role


async def _has_entra_functions(conn: asyncpg.Connection) -> bool:
    found = await conn.fetchval("SELECT to_regproc('pgaadauth_create_principal_with_oid') IS NOT NULL")
    return bool(found)


async def ensure_role(conn: asyncpg.Connection, role: str, object_id: str = "") -> bool:
    """Create the bot's login role if missing; returns whether it was created. With object_id (an
    Entra managed identity's) on an Azure server, the role is that identity's."""
    check_role(role)
    if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
        return False
    if object_id:
        if not _OBJECT_ID.match(object_id):
            raise ValueError(f"object id {object_id!r} is not a GUID (the identity's principal id)")
        if not await _has_entra_functions(conn):
            raise ValueError(
                "this server has no Entra authentication (pgaadauth): create the role without --object-id"
            )
        # 'service': a managed identity; neither an administrator nor bound to MFA.
        await conn.execute(
            "SELECT * FROM pgaadauth_create_principal_with_oid($1, $2, 'service', false, false)",
            role,
            object_id,
        )
    else:
        await conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
    log.info("created the bot's database role %s", role)
    return True


async def grant_bot_role(conn: asyncpg.Connection, role: str) -> None:
    """Data rights on the feedback tables only: no CREATE anywhere, no TRUNCATE, no other table."""
    check_role(role)
    database = await conn.fetchval("SELECT current_database()")
    async with conn.transaction():
        await conn.execute(f'REVOKE ALL ON DATABASE "{database}" FROM {role}')
        await conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {role}')
        # PostgreSQL 14 and older let every role create in public; the bot must not.
        await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        await conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        tables = ", ".join(FEEDBACK_TABLES)
        await conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO {role}")
        await conn.execute(f"GRANT SELECT ON schema_migrations TO {role}")
        # The identity columns' sequences (answer_feedback.id, unattributed_feedback.id).
        await conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    log.info("granted %s data rights on %s", role, tables)
