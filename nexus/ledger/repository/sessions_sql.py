"""The SQL that routing runs per message on sessions and aliases, built once at import."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, insert, select

from nexus.ledger.models import Session, SessionAlias, SessionHistory, table_of
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository._sql import columns_for, upsert_insert
from nexus.ledger.repository.dialect_sql import PerDialect

sessions = table_of(Session)
aliases = table_of(SessionAlias)
history = table_of(SessionHistory)

_SESSION_COLUMNS = columns_for(sessions, SessionRecord)

SESSION_BY_ID = select(*_SESSION_COLUMNS).where(sessions.c.id == bindparam("session_id"))
SESSION_BY_LABEL = select(*_SESSION_COLUMNS).where(sessions.c.label == bindparam("label"))
ALIAS_TARGET = select(aliases.c.session_label).where(aliases.c.alias == bindparam("label"))

# The session with the label, with where the label leads as an alias (NULL: nowhere).
RESOLVE = select(ALIAS_TARGET.scalar_subquery().label("onward"), *_SESSION_COLUMNS).where(
    sessions.c.label == bindparam("label")
)

# Inserts take their values by column name at execution.
RECORD_MOVE = insert(history)


def _new_session(connection: Connection) -> Any:
    return (
        upsert_insert(connection, sessions)
        .on_conflict_do_nothing(index_elements=["label"])
        .returning(sessions.c.id)
    )


NEW_SESSION = PerDialect(_new_session)
