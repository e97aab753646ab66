"""Full-text search over inbound events' text (hooks' `ctx.search_events`), through an
index on both databases: a GIN index over `to_tsvector('simple', text)` on Postgres, the
`events_fts` FTS5 table (filled by a trigger as events are stored) on SQLite.

The contract is the same on both: an inbound event matches when one of the words of its
text starts with one of the query's words (case-insensitive, letters and digits only, at
most eight words of two or more characters); matches come newest first (`received_at`,
then id), at most `limit` of them.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, Integer, bindparam, select, text

from nexus.ledger.records import EventRecord
from nexus.ledger.repository._sql import columns_for, to_record
from nexus.ledger.repository.dialect_sql import PerDialect
from nexus.ledger.repository.tables import events

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_WORDS = 8

# The condition repeats the index's expression and predicate word for word, with the
# direction written in, not bound: a partial index serves only a query the planner can
# prove inside its predicate, which it cannot do with a parameter under a generic plan.
_POSTGRES_MATCH = text(
    "events.direction = 'inbound' AND "
    "to_tsvector('simple', coalesce(events.text, '')) @@ to_tsquery('simple', :terms)"
)
# FTS5 rows carry the event's id: the match is read from the FTS index, each event found
# by its primary key.
_SQLITE_MATCH = text(
    "events.direction = 'inbound' AND "
    "events.id IN (SELECT event_id FROM events_fts WHERE events_fts MATCH :terms)"
)
_SEARCH = PerDialect(
    lambda connection: (
        select(*columns_for(events, EventRecord))
        .where(_POSTGRES_MATCH if connection.dialect.name == "postgresql" else _SQLITE_MATCH)
        .order_by(events.c.received_at.desc(), events.c.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )
)


def search_words(query: str) -> list[str]:
    """The words of a query worth matching: lower-cased, letters and digits, two or more
    characters, no repeats, the first MAX_WORDS."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if len(word) > 1:
            seen.setdefault(word, None)
    return list(seen)[:MAX_WORDS]


def match_expression(words: list[str], dialect: str) -> str:
    """Any of the words as a prefix, in the dialect's query language (the words hold only
    letters and digits, so nothing in them is syntax)."""
    if dialect == "postgresql":
        return " | ".join(f"{word}:*" for word in words)
    return " OR ".join(f'"{word}"*' for word in words)


def search_events(connection: Connection, query: str, *, limit: int) -> list[EventRecord]:
    words = search_words(query)
    if not words:
        return []
    terms = match_expression(words, connection.dialect.name)
    rows = connection.execute(_SEARCH(connection), {"terms": terms, "limit": limit})
    return [to_record(EventRecord, row) for row in rows]
