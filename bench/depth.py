"""Context assembly by depth: what a turn does before its model call — the turn service's snapshot
(session, persona, capabilities, the ledger's context read from the latest compaction) and
its assembly into a model request — at depth 100 / 1,000 / 10,000 of a chain compacted
every 50 turns (keeping 10), so every head sits at the same place after its compaction.
The raw ledger reads, on both databases, are `bench.ledger`'s."""

from __future__ import annotations

import statistics
from typing import Any

from sqlalchemy import text

from bench import harness
from bench.ledger import _session, median_ms
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.engine.query import QueryMessage
from nexus.ledger.enums import MessageSource
from nexus.settings import Settings
from nexus.turns.service import TurnService
from tests.support import build_chain

COMPACT_EVERY, KEEP = 50, 10
QUERY = (QueryMessage(text="and what now?", source=MessageSource.HUMAN),)


def turns_for(url: str, database: Database) -> TurnService:
    return bootstrap(Settings(database_url=url, model="scripted"), database=database).turns


def assemble_context(turns: TurnService, session_id: str) -> int:
    """What `TurnService.run_turn` does before calling the model; returns the messages built."""
    snapshot = turns.snapshot(session_id)
    assembled = turns.reader().assemble(snapshot, QUERY)
    return len(assembled.request.messages)


def chain_with_forks(database: Database, depths: list[int]) -> dict[int, str]:
    """One compacted chain as deep as the deepest depth; a session headed at each depth."""
    session, _ = _session(database, "bench-depth")
    with database.unit_of_work() as uow:
        chain = build_chain(
            uow.ledger, session, max(depths), compact_every=COMPACT_EVERY, keep=KEEP
        )
        forks = {d: uow.ledger.sessions.fork(chain[d - 1], label=f"depth-{d}").id for d in depths}
        uow.commit()
    with database.engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return forks


def run(*, quick: bool) -> dict[str, Any]:
    depths = [100, 1_000] if quick else [100, 1_000, 10_000]
    repetitions = 30 if quick else 200
    with harness.database() as url:
        database = Database(url)
        try:
            forks = chain_with_forks(database, depths)
            turns = turns_for(url, database)
            by_depth: dict[str, Any] = {}
            for depth in depths:
                assemble_context(turns, forks[depth])  # warm: statements compiled, caches
            # Interleaved rounds, so noise falls on every depth alike.
            samples: dict[int, list[float]] = {d: [] for d in depths}
            for _ in range(5):
                for depth in depths:
                    samples[depth].append(
                        median_ms(
                            lambda d=depth: assemble_context(turns, forks[d]),  # type: ignore[misc]
                            repetitions // 5,
                        )
                    )
            for depth in depths:
                by_depth[str(depth)] = {
                    "assembly_ms": statistics.median(samples[depth]),
                    "messages": assemble_context(turns, forks[depth]),
                }
        finally:
            database.dispose()
    first, last = str(depths[0]), str(depths[-1])
    return {
        "depths": by_depth,
        "compact_every": COMPACT_EVERY,
        "keep": KEEP,
        "ratio": by_depth[last]["assembly_ms"] / by_depth[first]["assembly_ms"],
        "deepest": depths[-1],
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
