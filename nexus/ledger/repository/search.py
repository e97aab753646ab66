"""Full-text search over what was said (smart routing): Postgres tsvector, SQLite FTS5."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from nexus.ledger.search_terms import SearchHit

# One term's newest matches through the full-text index (the GIN expression index on
# Postgres, FTS5 on SQLite), then the sessions a message may be routed to: active, not a
# worker. The index read is bounded first and the session filter applied after it (it
# drops, never adds, rows), so the planner cannot trade the index for a scan of every
# message. `{n}` numbers the term; `recent_hits` joins one per term with UNION ALL.
_POSTGRES_TERM = """
    SELECT * FROM (
      SELECT CAST(:term_{n} AS text) AS term, th.session_id AS session_id,
             hit.turn_id AS turn_id
      FROM (SELECT m.id, m.turn_id FROM messages m
            WHERE m.role IN ('user', 'assistant')
              AND to_tsvector('english', coalesce(m.content->>'text', ''))
                  @@ plainto_tsquery('english', :term_{n})
            ORDER BY m.id DESC LIMIT :per_term) AS hit
      JOIN threads th ON th.turn_id = hit.turn_id
      JOIN sessions s ON s.id = th.session_id
      WHERE s.status = 'active' AND NOT s.is_subagent
    ) AS term_{n}
"""
# FTS5 rowids are the messages' rowids, so the newest matches come first without a sort.
_SQLITE_TERM = """
    SELECT * FROM (
      SELECT CAST(:term_{n} AS text) AS term, th.session_id AS session_id,
             hit.turn_id AS turn_id
      FROM (SELECT rowid, turn_id FROM messages_fts WHERE messages_fts MATCH :match_{n}
            ORDER BY rowid DESC LIMIT :per_term) AS hit
      JOIN threads th ON th.turn_id = hit.turn_id
      JOIN sessions s ON s.id = th.session_id
      WHERE s.status = 'active' AND NOT s.is_subagent
    ) AS term_{n}
"""


class SearchRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def recent_hits(self, terms: Sequence[str], *, per_term: int) -> list[SearchHit]:
        """For each term, its newest `per_term` matching user and assistant messages: at
        most len(terms) * per_term rows, in one statement, whatever the ledger's size."""
        if not terms:
            return []
        postgres = self._conn.dialect.name == "postgresql"
        branch = _POSTGRES_TERM if postgres else _SQLITE_TERM
        statement = " UNION ALL ".join(branch.format(n=n) for n in range(len(terms)))
        params: dict[str, object] = {"per_term": per_term}
        for n, term in enumerate(terms):
            params[f"term_{n}"] = term
            params[f"match_{n}"] = f'"{term}"'  # FTS5: a quoted term is a plain word
        rows = self._conn.execute(text(statement), params)
        return [SearchHit(row.term, row.session_id, row.turn_id) for row in rows]
