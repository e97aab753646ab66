"""Full-text search over what was said in turns: Postgres tsvector, SQLite FTS5."""

from __future__ import annotations

import re

from sqlalchemy import Connection, text

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
# Words that match everywhere and say nothing about which conversation is meant.
_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "and",
        "or",
        "for",
        "of",
        "to",
        "in",
        "on",
        "at",
        "is",
        "are",
        "was",
        "were",
        "be",
        "it",
        "this",
        "that",
        "with",
        "from",
        "by",
        "as",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "i",
        "about",
        "please",
        "can",
        "could",
        "would",
        "should",
        "what",
        "which",
        "who",
        "how",
    }
)

# Sessions ranked by how well their messages match; a message counts for the session its turn
# was created in (the thread row's session), so a fork ranks on what was said after forking.
_POSTGRES = text(
    """
    SELECT th.session_id AS session_id,
           sum(ts_rank(to_tsvector('english', coalesce(m.content->>'text', '')),
                       to_tsquery('english', :query))) AS score
    FROM messages m
    JOIN threads th ON th.turn_id = m.turn_id
    WHERE m.role IN ('user', 'assistant')
      AND to_tsvector('english', coalesce(m.content->>'text', '')) @@ to_tsquery('english', :query)
    GROUP BY th.session_id
    ORDER BY score DESC, th.session_id
    LIMIT :limit
    """
)
# FTS5's `rank` is bm25 (lower is better); the ORDER BY keeps SQLite from flattening the
# subquery into the aggregate, where ranking functions are not allowed.
_SQLITE = text(
    """
    SELECT th.session_id AS session_id, -sum(hit.rank) AS score
    FROM (SELECT turn_id, rank FROM messages_fts WHERE messages_fts MATCH :query
          ORDER BY rank) AS hit
    JOIN threads th ON th.turn_id = hit.turn_id
    GROUP BY th.session_id
    ORDER BY score DESC, th.session_id
    LIMIT :limit
    """
)


def search_terms(query: str) -> list[str]:
    """The words worth matching on, lower-cased, stop words out, order kept, no repeats."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in _STOP:
            seen.setdefault(word, None)
    return list(seen)


class SearchRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def sessions_matching(self, query: str, *, limit: int = 5) -> list[tuple[str, float]]:
        """(session id, score) best first; any one term may match (OR), more matches rank higher."""
        terms = search_terms(query)
        if not terms:
            return []
        if self._conn.dialect.name == "postgresql":
            statement, expression = _POSTGRES, " | ".join(terms)
        else:
            statement, expression = _SQLITE, " OR ".join(f'"{term}"' for term in terms)
        rows = self._conn.execute(statement, {"query": expression, "limit": limit})
        return [(row.session_id, float(row.score)) for row in rows]
