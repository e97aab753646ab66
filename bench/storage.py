"""Storage: bytes on disk per turn after 1,000 turns (200 with `--quick`), Nexus against
LangGraph's `PostgresSaver` holding the same messages.

Each side gets a fresh database: Nexus's migrated ledger, the saver's `setup()` tables.
Nexus commits one session's turns through the repository's commit (`bench.peer.NexusThread`'s
chain, no compaction: the same messages and nothing else); the saver stores one
checkpoint per step whose `messages` channel gained the same user + assistant pair
(`bench.peer.LangGraphThread`, as `add_messages` state does). Size: `pg_total_relation_size`
(heap, indexes, TOAST) summed over the side's tables after a `VACUUM` (so dead tuples and
free space maps are settled alike), less the same sum in the fresh database, per turn.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench import harness
from bench.peer import LangGraphThread, NexusThread
from nexus.db import Database

SIZE = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname = 'public'"
)


TABLES = (
    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname = 'public'"
)


def _tables(url: str) -> dict[str, int]:
    """Each table's bytes on disk (with its indexes and TOAST)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {name: int(size) for name, size in connection.execute(text(TABLES)).all()}
    finally:
        engine.dispose()


def _grown(before: dict[str, int], after: dict[str, int], turns: int) -> dict[str, float]:
    """Bytes per turn each table grew by, largest first (tables that did not grow left out)."""
    grown = {name: (size - before.get(name, 0)) / turns for name, size in after.items()}
    return dict(sorted(((k, v) for k, v in grown.items() if v > 0), key=lambda kv: -kv[1]))


def _size(url: str, *, full: bool = False) -> int:
    """Bytes on disk of every table in `public` (with its indexes and TOAST), vacuumed;
    `full`: rewritten compact first (VACUUM FULL), as a table many sessions share stays."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            connection.execute(text("VACUUM FULL" if full else "VACUUM"))
            return int(connection.execute(text(SIZE)).scalar_one())
    finally:
        engine.dispose()


def run(*, quick: bool, turns: int | None = None) -> dict[str, Any]:
    turns = turns or (200 if quick else 1_000)
    with harness.database() as nexus_url, harness.database() as peer_url:
        conninfo = make_url(peer_url).set(drivername="postgresql").render_as_string(False)
        database = Database(nexus_url)
        try:
            nexus_empty, nexus_before = _size(nexus_url, full=True), _tables(nexus_url)
            NexusThread(nexus_url, database, turns, compact=False)
        finally:
            database.dispose()
        nexus_bytes = _size(nexus_url) - nexus_empty
        nexus_tables = _grown(nexus_before, _tables(nexus_url), turns)
        nexus_compact = _size(nexus_url, full=True) - nexus_empty
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            peer_empty, peer_before = _size(peer_url, full=True), _tables(peer_url)
            peer = LangGraphThread(saver, "storage")
            for _ in range(turns):
                peer.step()
        peer_bytes = _size(peer_url) - peer_empty
        peer_tables = _grown(peer_before, _tables(peer_url), turns)
        peer_compact = _size(peer_url, full=True) - peer_empty
    return {
        "turns": turns,
        "nexus_bytes_per_turn": nexus_bytes / turns,
        "langgraph_bytes_per_turn": peer_bytes / turns,
        "ratio": peer_bytes / nexus_bytes,
        # Rewritten compact: one session's rows updated 1,000 times leave free space in
        # its own pages (sessions, threads, agents), which many sessions would share.
        "nexus_compact_bytes_per_turn": nexus_compact / turns,
        "langgraph_compact_bytes_per_turn": peer_compact / turns,
        "compact_ratio": peer_compact / nexus_compact,
        "nexus_empty_bytes": nexus_empty,
        "langgraph_empty_bytes": peer_empty,
        "nexus_tables_bytes_per_turn": nexus_tables,
        "langgraph_tables_bytes_per_turn": peer_tables,
        "note": "the same user + assistant pair per turn on each side; Nexus stores each "
        "turn once, LangGraph one checkpoint per step with the whole message list",
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
