"""A peer: LangGraph's Postgres checkpointer (`PostgresSaver`, sync) beside Nexus, at equal
depth. One step of a chat agent on each side:

- LangGraph: `put` one checkpoint whose `messages` channel gained a user + assistant
  message pair, then `get_tuple` the thread's state back.
- Nexus: commit one turn (the repository's CAS commit, one unit of work) and assemble the
  next turn's context (`bench.depth.assemble_context`, as the turn service does).

We drive the saver directly rather than through a compiled `StateGraph`: a graph
invocation writes more than one checkpoint per step (input, then each node) and adds its
own Python on top, so `put` + `get_tuple` is the least a LangGraph step can cost — the
peer's floor, the comparison most favourable to it. The channel holds the full message
list, as `add_messages` state does. Each side has a fresh database of its own; d prior
steps are stored the same way before the timed steps at depth d.

Nexus runs as designed, compacting every 50 turns (keeping 10); the same chain without
compaction is measured too (`nexus_uncompacted_ms`), the same content the peer reads.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import LATEST_VERSION, Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bench import harness, prose
from bench.depth import COMPACT_EVERY, KEEP, assemble_context, turns_for
from bench.ledger import _session
from nexus.db import Database
from tests.support import build_chain, text_turn

Said = Callable[[int], tuple[str, str]]  # step i's question and answer


class LangGraphThread:
    """One conversation thread in the checkpointer, stepped as a chat agent would."""

    def __init__(self, saver: PostgresSaver, thread_id: str, said: Said = prose.short) -> None:
        self.saver, self.said = saver, said
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.read_config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.messages: list[BaseMessage] = []
        self.version: str | None = None
        self.steps = 0

    def step(self) -> int:
        """Append a question and its answer, store the checkpoint, read the state back."""
        question, answer = self.said(self.steps)
        self.messages = [*self.messages, HumanMessage(question), AIMessage(answer)]
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint: Checkpoint = {
            "v": LATEST_VERSION,
            "id": str(uuid6(clock_seq=self.steps)),
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": {"messages": self.messages},
            "channel_versions": {"messages": self.version},
            "versions_seen": {"agent": {"messages": self.version}},
            "updated_channels": ["messages"],
        }
        metadata: Any = {"source": "loop", "step": self.steps, "parents": {}}
        self.config = self.saver.put(self.config, checkpoint, metadata, {"messages": self.version})
        self.steps += 1
        state = self.saver.get_tuple(self.read_config)
        assert state is not None
        return len(state.checkpoint["channel_values"]["messages"])


class NexusThread:
    """One session: commit a turn, then assemble the next turn's context."""

    def __init__(self, url: str, database: Database, depth: int, *, compact: bool) -> None:
        self.database = database
        self.turns = turns_for(url, database)
        self.session, _ = _session(database, f"peer-{depth}-{compact}")
        with database.unit_of_work() as uow:
            every = COMPACT_EVERY if compact else None
            self.head = build_chain(
                uow.ledger, self.session, depth, compact_every=every, keep=KEEP
            )[-1]
            self.epoch = uow.ledger.sessions.claim(self.session.id)
            uow.commit()
        self.steps = 0

    def step(self) -> int:
        draft = text_turn(self.session, self.head, f"question {self.steps}")
        with self.database.unit_of_work() as uow:
            outcome = uow.ledger.turns.commit(draft, epoch=self.epoch)
            if not outcome.committed or outcome.view is None:
                raise RuntimeError("the benchmark's own commit was fenced")
            uow.commit()
        # As TurnCommit.commit does: the committing worker knows its turn without reading it.
        self.turns.contexts.advance(self.session.id, outcome.view)
        self.head, self.steps = draft.id, self.steps + 1
        return assemble_context(self.turns, self.session.id)


def _timed(step: Callable[[], object], count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        step()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def run(*, quick: bool) -> dict[str, Any]:
    # Quick: shallower, since storing d prior LangGraph steps costs O(d²) bytes.
    depths = [50, 200] if quick else [100, 1_000]
    steps = 15 if quick else 45  # bursts of 5, a whole number of turns of the order
    out: dict[str, Any] = {"steps_timed": steps, "depths": {}}
    with harness.database() as nexus_url, harness.database() as peer_url:
        conninfo = make_url(peer_url).set(drivername="postgresql").render_as_string(False)
        database = Database(nexus_url)
        try:
            with PostgresSaver.from_conn_string(conninfo) as saver:
                saver.setup()  # the documented first call: creates its tables
                for depth in depths:
                    peer = LangGraphThread(saver, f"peer-{depth}")
                    for _ in range(depth):  # d prior steps, stored as the timed ones are
                        peer.step()
                    nexus = NexusThread(nexus_url, database, depth, compact=True)
                    flat = NexusThread(nexus_url, database, depth, compact=False)
                    # Fresh tables have no planner statistics; autovacuum would gather
                    # them in a live deployment: gather them now, on both sides alike.
                    with saver._cursor() as cursor:
                        cursor.execute("ANALYZE")
                    with database.engine.connect() as connection:
                        connection.execution_options(isolation_level="AUTOCOMMIT").execute(
                            text("ANALYZE")
                        )
                    for side in (peer, nexus, flat):
                        side.step()  # warm
                    # Alternating short bursts, the order turned each round: noise falls on
                    # all three alike, and each follows each as often. (In a fixed order the
                    # side right after LangGraph's large checkpoint write paid for the
                    # database's work after it: 2.39 ms a step against the same code's 2.03
                    # ms one place later.)
                    found: dict[str, list[float]] = {"peer": [], "nexus": [], "flat": []}
                    sides: list[tuple[str, Callable[[], int]]] = [
                        ("peer", peer.step),
                        ("nexus", nexus.step),
                        ("flat", flat.step),
                    ]
                    for burst in range(steps // 5):
                        turn = burst % len(sides)
                        for name, step in sides[turn:] + sides[:turn]:
                            found[name].append(_timed(step, 5))
                    row = {
                        "langgraph_ms": statistics.median(found["peer"]),
                        "nexus_ms": statistics.median(found["nexus"]),
                        "nexus_uncompacted_ms": statistics.median(found["flat"]),
                    }
                    row["speedup"] = row["langgraph_ms"] / row["nexus_ms"]
                    row["speedup_uncompacted"] = row["langgraph_ms"] / row["nexus_uncompacted_ms"]
                    out["depths"][str(depth)] = row
        finally:
            database.dispose()
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
