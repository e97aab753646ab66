"""Storage: bytes on disk per turn after 1,000 turns (200 with `--quick`), Nexus against
LangGraph's `PostgresSaver` holding the same messages.

Each side gets a fresh database: Nexus's migrated ledger, the saver's `setup()` tables.
Nexus commits one session's turns through the repository's commit, one unit of work a turn
(no compaction: the same messages and the turn's own row, nothing else); the saver stores one
checkpoint per step whose `messages` channel gained the same user + assistant pair
(`bench.peer.LangGraphThread`, as `add_messages` state does). Size: `pg_total_relation_size`
(heap, indexes, TOAST) summed over the side's tables after a `VACUUM` (so dead tuples and
free space maps are settled alike), less the same sum in the fresh database, per turn.

The messages are prose of a chat's size and entropy (`bench.prose.exchange`: user 150–400
B, assistant 400–1,200 B), identical on both sides. Postgres compresses (pglz) any value
over ~2 KB, so what the saver's whole-list blobs cost on disk depends on how well the text
compresses: the result names the text's own pglz ratio and the blobs' as stored. The
same run with the old "question i" / "re: question i" pair (`short`, which pglz
compresses ~30× in a list) shows how much a synthetic message flatters the saver.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench import harness, prose
from bench.ledger import _session
from bench.peer import LangGraphThread, Said
from nexus.db import Database
from nexus.ids import now_ms
from nexus.ledger.records import TokenUsage
from tests.support import text_turn

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


def _pglz(url: str, text_: str, piece: int = 16_384) -> float:
    """How many times smaller Postgres's TOAST compression makes `text_`, stored in pieces
    of `piece` bytes (ASCII: characters are bytes)."""
    pieces = [text_[at : at + piece] for at in range(0, len(text_) - piece + 1, piece)]
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TEMP TABLE pglz (x text) ON COMMIT DROP"))
            connection.execute(text("INSERT INTO pglz VALUES (:x)"), [{"x": x} for x in pieces])
            found = "SELECT sum(octet_length(x))::float / sum(pg_column_size(x)) FROM pglz"
            return float(connection.execute(text(found)).scalar_one())
    finally:
        engine.dispose()


def _blobs(url: str) -> float:
    """How many times smaller Postgres stores the saver's blobs than their serialized size."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            found = "SELECT sum(octet_length(blob))::float / sum(pg_column_size(blob)) "
            return float(connection.execute(text(found + "FROM checkpoint_blobs")).scalar_one())
    finally:
        engine.dispose()


def _commit_turns(database: Database, turns: int, said: Said) -> None:
    """One session's turns through the repository's commit, one unit of work each, as a
    worker commits them: a clock start time and the model's usage and stop reason, as a
    turn the engine ran has (a constant start would shrink the start-time indexes)."""
    session, epoch = _session(database, "storage")
    head: str | None = None
    for index in range(turns):
        draft = text_turn(session, head, *said(index)).model_copy(
            update={
                "started_at": now_ms(),
                "usage": TokenUsage(input_tokens=1_000 + 300 * index, output_tokens=250),
                "stop_reason": "end_turn",
            }
        )
        with database.unit_of_work() as uow:
            if not uow.ledger.turns.commit(draft, epoch=epoch).committed:
                raise RuntimeError("the benchmark's own commit was fenced")
            uow.commit()
        head = draft.id


def _measure(turns: int, said: Said) -> dict[str, Any]:
    """Both sides' bytes per turn after `turns` turns whose messages are `said(i)`."""
    with harness.database() as nexus_url, harness.database() as peer_url:
        conninfo = make_url(peer_url).set(drivername="postgresql").render_as_string(False)
        database = Database(nexus_url)
        try:
            nexus_empty, nexus_before = _size(nexus_url, full=True), _tables(nexus_url)
            _commit_turns(database, turns, said)
        finally:
            database.dispose()
        nexus_bytes = _size(nexus_url) - nexus_empty
        nexus_tables = _grown(nexus_before, _tables(nexus_url), turns)
        nexus_compact = _size(nexus_url, full=True) - nexus_empty
        nexus_compact_tables = _grown(nexus_before, _tables(nexus_url), turns)
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            peer_empty, peer_before = _size(peer_url, full=True), _tables(peer_url)
            peer = LangGraphThread(saver, "storage", said)
            for _ in range(turns):
                peer.step()
        peer_bytes = _size(peer_url) - peer_empty
        peer_tables = _grown(peer_before, _tables(peer_url), turns)
        peer_compact = _size(peer_url, full=True) - peer_empty
        blobs = _blobs(peer_url)
        said_text = "\n".join(m for i in range(turns) for m in said(i))
        pglz = _pglz(peer_url, said_text) if len(said_text) >= 16_384 else None
    return {
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
        "nexus_compact_tables_bytes_per_turn": nexus_compact_tables,
        "langgraph_tables_bytes_per_turn": peer_tables,
        "text_bytes_per_turn": sum(len(m) for i in range(turns) for m in said(i)) / turns,
        # The messages' own text in 16 KB pieces, and the saver's blobs as stored.
        "text_pglz_ratio": pglz,
        "langgraph_blob_pglz_ratio": blobs,
    }


def run(*, quick: bool, turns: int | None = None, short: bool = True) -> dict[str, Any]:
    """Prose messages (`bench.prose.exchange`); with `short`, the same again with the old
    "question i" / "re: question i" pair (`short`), which pglz compresses ~30×."""
    turns = turns or (200 if quick else 1_000)
    found: dict[str, Any] = {"turns": turns, **_measure(turns, prose.exchange)}
    found["note"] = (
        "the same user + assistant pair per turn on each side (prose: user 150-400 B, "
        "assistant 400-1,200 B); Nexus stores each turn once, LangGraph one checkpoint "
        "per step with the whole message list"
    )
    if short:
        found["short"] = _measure(turns, prose.short)
    return found


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
