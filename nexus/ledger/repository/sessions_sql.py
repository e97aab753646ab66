"""The SQL that routing runs per message on sessions and aliases, built once at import."""

from __future__ import annotations

from sqlalchemy import bindparam, insert, select

from nexus.ledger.enums import SessionStatus
from nexus.ledger.models import LIVE_SESSION
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository._sql import columns_for
from nexus.ledger.repository.dialect_sql import insert_unless_present
from nexus.ledger.repository.tables import aliases, history, sessions

_SESSION_COLUMNS = columns_for(sessions, SessionRecord)

SESSION_BY_ID = select(*_SESSION_COLUMNS).where(sessions.c.id == bindparam("session_id"))
_LIVE = sessions.c.status != SessionStatus.DELETED.value
# The live session with the label, else the newest deleted one that had it.
SESSION_BY_LABEL = (
    select(*_SESSION_COLUMNS)
    .where(sessions.c.label == bindparam("label"))
    .order_by(_LIVE.desc(), sessions.c.created_at.desc(), sessions.c.id.desc())
    .limit(1)
)
LIVE_SESSION_BY_LABEL = select(*_SESSION_COLUMNS).where(
    sessions.c.label == bindparam("label"), _LIVE
)
ALIAS_TARGET = select(aliases.c.session_label).where(aliases.c.alias == bindparam("label"))

# The session with the label, with where the label leads as an alias (NULL: nowhere).
# A deleted session is left out: its label is free.
RESOLVE = select(ALIAS_TARGET.scalar_subquery().label("onward"), *_SESSION_COLUMNS).where(
    sessions.c.label == bindparam("label"), _LIVE
)
# ...and the session's row locked as `SessionRepository.lock` locks it (FOR NO KEY UPDATE),
# for a router that routes one event: its lock and its read in one round trip.
RESOLVE_LOCKING = RESOLVE.with_for_update(key_share=True)

# Inserts take their values by column name at execution.
RECORD_MOVE = insert(history)


NEW_SESSION = insert_unless_present(
    sessions, ["label"], returning=sessions.c.id, among=LIVE_SESSION
)
