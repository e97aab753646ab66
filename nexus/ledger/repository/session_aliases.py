"""Session aliases: labels that lead to another session's label, read and written."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, select, update

from nexus.ids import Clock
from nexus.ledger.repository._sql import serialize, upsert_insert
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.sessions_sql import ALIAS_TARGET, LIVE_SESSION_BY_LABEL
from nexus.ledger.repository.tables import aliases

# A longer chain of aliases than this is a circle or corruption; refuse rather than spin.
MAX_ALIAS_HOPS = 64
# The lock that alias writers (and entity merges, which write them) take turns on.
ALIAS_WRITERS = "nexus:session-aliases"


class SessionAliases:
    """The aliases part of the session repository (`uow.ledger.sessions`)."""

    _conn: Connection
    _clock: Clock

    def final_label(self, label: str) -> str:
        """Where `label`'s aliases lead: the first label on the way that is no alias."""
        return self._alias_chain(label)[-1]

    def _alias_chain(self, label: str) -> list[str]:
        """`label`, then each alias target in turn, ending with a label that is no alias."""
        chain = [label]
        while (target := self._alias_target(chain[-1])) is not None:
            if target in chain or len(chain) > MAX_ALIAS_HOPS:
                # Alias writes refuse circles; only a hand-edited ledger gets here.
                raise LedgerConflict(f"the aliases of {label!r} lead in a circle: {chain}")
            chain.append(target)
        return chain

    def aliases_of(self, session_label: str) -> list[tuple[str, str | None]]:
        """(alias, reason) pairs that resolve to `session_label`, oldest first."""
        rows = self._conn.execute(
            select(aliases.c.alias, aliases.c.reason)
            .where(aliases.c.session_label == session_label)
            .order_by(aliases.c.created_at, aliases.c.alias)
        ).all()
        return [(row.alias, row.reason) for row in rows]

    def alias_page(self, *, after: str | None, limit: int) -> list[AliasRow]:
        """(alias, session label, reason, created at) in alias order, after `after`."""
        query = _ALIAS_ROWS.order_by(aliases.c.alias)
        if after is not None:
            query = query.where(aliases.c.alias > after)
        return [_alias_row(row) for row in self._conn.execute(query.limit(limit))]

    def alias(self, alias: str) -> AliasRow | None:
        row = self._conn.execute(_ALIAS_ROWS.where(aliases.c.alias == alias)).one_or_none()
        return None if row is None else _alias_row(row)

    def add_alias(self, alias: str, session_label: str, *, reason: str) -> bool:
        """Make `alias` resolve to `session_label`; False if the alias existed already.
        Refused when `session_label`'s own aliases lead back to `alias` (a circle)."""
        self._check_alias(alias, session_label)
        statement = upsert_insert(self._conn, aliases).values(
            alias=alias, session_label=session_label, created_at=self._clock(), reason=reason
        )
        result = self._conn.execute(statement.on_conflict_do_nothing(index_elements=["alias"]))
        return bool(result.rowcount)

    def repoint_alias(self, alias: str, session_label: str, *, reason: str) -> bool:
        """Make the existing `alias` resolve to `session_label` instead; False if there is
        no such alias or it points there already. Refuses circles, as add_alias does."""
        self._check_alias(alias, session_label)
        result = self._conn.execute(
            update(aliases)
            .where(aliases.c.alias == alias, aliases.c.session_label != session_label)
            .values(session_label=session_label, created_at=self._clock(), reason=reason)
        )
        return bool(result.rowcount)

    def remove_alias(self, alias: str) -> str:
        """Delete `alias`; returns the label it led to. What is addressed to it from now on
        goes to the session with that label, if one exists, or starts one."""
        serialize(self._conn, ALIAS_WRITERS)
        target = self._alias_target(alias)
        if target is None:
            raise NotFound(f"no alias {alias!r}")
        self._conn.execute(delete(aliases).where(aliases.c.alias == alias))
        return target

    def _check_alias(self, alias: str, session_label: str) -> None:
        # Alias writers take turns, so two of them cannot each close half of a circle that
        # neither sees (a → b and b → a, committed at once).
        serialize(self._conn, ALIAS_WRITERS)
        if self._conn.execute(LIVE_SESSION_BY_LABEL, {"label": session_label}).first() is None:
            raise NotFound(f"no session labelled {session_label!r}")
        if alias in self._alias_chain(session_label):
            raise LedgerConflict(
                f"{alias!r} → {session_label!r} would make aliases lead in a circle"
            )

    def _alias_target(self, label: str) -> str | None:
        return self._conn.execute(ALIAS_TARGET, {"label": label}).scalar_one_or_none()


# An alias as listed: (alias, the label it points at, why it was written, when).
AliasRow = tuple[str, str, str | None, int]
_ALIAS_ROWS = select(
    aliases.c.alias, aliases.c.session_label, aliases.c.reason, aliases.c.created_at
)


def _alias_row(row: Any) -> AliasRow:
    return (row.alias, row.session_label, row.reason, int(row.created_at))
