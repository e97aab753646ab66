"""Ledger benchmark: repository turn commits vs a bare Core write, and context reads by depth.

Run: python -m bench.ledger [--quick] [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, create_engine, insert, select, text, update
from sqlalchemy.engine import make_url

from nexus.db import Database
from nexus.db.migrate import upgrade
from nexus.ids import new_id, now_ms
from nexus.ledger.models import Message, Session, Turn, table_of
from nexus.ledger.records import NewSession, SessionRecord
from tests.support import build_chain, text_turn

RESULTS = Path(__file__).with_name("results")
DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"

sessions, turns, messages = table_of(Session), table_of(Turn), table_of(Message)

# The floor: the least a per-turn write can do. Statements are built once, like ours.
_LOCK = (
    select(sessions.c.thread_id, sessions.c.epoch)
    .where(sessions.c.id == bindparam("sid"))
    .with_for_update()
)
_TURN = insert(turns)
_MESSAGES = insert(messages)
_POINT = (
    update(sessions).where(sessions.c.id == bindparam("sid")).values(thread_id=bindparam("head"))
)


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh, migrated database, dropped afterwards whatever happens."""
    name = f"nexus_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.db"
        upgrade(url)
        yield url


def _session(database: Database, label: str) -> tuple[SessionRecord, int]:
    with database.unit_of_work() as uow:
        agent = uow.ledger.agents.ensure("bench")
        session = uow.ledger.sessions.create(NewSession(label=label, persona_id=agent.id))
        epoch = uow.ledger.sessions.claim(session.id)
        uow.commit()
    return session, epoch


class RepositoryWriter:
    """Commits through the repository: one unit of work per turn, as a worker would."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.session, self.epoch = _session(database, "bench-repository")
        self.head: str | None = None

    def commit(self) -> None:
        draft = text_turn(self.session, self.head, "how are you?", "fine, thanks")
        with self.database.unit_of_work() as uow:
            if not uow.ledger.turns.commit(draft, epoch=self.epoch).committed:
                raise RuntimeError("the benchmark's own commit was fenced")
            uow.commit()
        self.head = draft.id


def bare_turn(connection: Connection, session_id: str, question: str, answer: str) -> str:
    """SELECT … FOR UPDATE, INSERT turn, INSERT 2 messages, UPDATE pointer: nothing else.

    The floor of a turn commit, shared with the bare Celery sketch (`bench/bare_app.py`)."""
    turn_id, now = new_id(), now_ms()
    head, epoch = connection.execute(_LOCK, {"sid": session_id}).one()
    connection.execute(
        _TURN,
        {
            "id": turn_id,
            "session_id": session_id,
            "parent_turn_id": head,
            "turn_type": "normal",
            "status": "completed",
            "epoch": epoch,
            "started_at": now,
            "completed_at": now,
        },
    )
    connection.execute(
        _MESSAGES,
        [
            {
                "id": new_id(),
                "turn_id": turn_id,
                "sequence": sequence,
                "role": role,
                "content": {"text": said},
                "created_at": now,
            }
            for sequence, (role, said) in enumerate(
                (("user", question), ("assistant", answer)), start=1
            )
        ],
    )
    connection.execute(_POINT, {"sid": session_id, "head": turn_id})
    return turn_id


class BareWriter:
    """The floor: `bare_turn` in one transaction per turn."""

    def __init__(self, database: Database) -> None:
        self.engine = database.engine
        self.session, self.epoch = _session(database, "bench-bare")

    def commit(self) -> None:
        with self.engine.begin() as connection:
            bare_turn(connection, self.session.id, "how are you?", "fine, thanks")


def _rate(commit: Callable[[], None], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        commit()
    return count / (time.perf_counter() - started)


def measure_commits(url: str, *, rounds: int, per_round: int) -> dict[str, Any]:
    """Commits/s of each writer and their ratio, from many short rounds run back to back.

    The ratio is the median of each round's own ratio: the two writers of a round share
    whatever the machine was doing then, so a noisy minute moves both, not the ratio.
    Rounds alternate which writer goes first.
    """
    database = Database(url)
    try:
        repository, bare = RepositoryWriter(database), BareWriter(database)
        _rate(repository.commit, per_round)  # warm-up: pools, caches, prepared statements
        _rate(bare.commit, per_round)
        rates: dict[str, list[float]] = {"repository": [], "bare": []}
        ratios: list[float] = []
        for index in range(rounds):
            order: list[tuple[str, Callable[[], None]]] = [
                ("repository", repository.commit),
                ("bare", bare.commit),
            ]
            for name, commit in order if index % 2 == 0 else reversed(order):
                rates[name].append(_rate(commit, per_round))
            ratios.append(rates["repository"][-1] / rates["bare"][-1])
        result: dict[str, Any] = {name: statistics.median(v) for name, v in rates.items()}
        result["ratio"] = statistics.median(ratios)
        low, _, high = statistics.quantiles(ratios, n=4)
        result["ratio_quartiles"] = [low, high]
        return result
    finally:
        database.dispose()


def median_ms(action: Callable[[], object], repetitions: int) -> float:
    samples = []
    for _ in range(repetitions):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def measure_reads(url: str, *, depths: list[int], repetitions: int) -> dict[str, Any]:
    """Context and full-ancestry read times at each depth of one chain (compaction every 50)."""
    database = Database(url)
    try:
        session, _ = _session(database, "bench-reads")
        with database.unit_of_work() as uow:
            chain = build_chain(uow.ledger, session, max(depths), compact_every=50, keep=10)
            uow.commit()
        if database.dialect == "postgresql":
            with database.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
        out: dict[str, Any] = {}
        # One read transaction per measurement, as context assembly would open.
        for depth in depths:
            head = chain[depth - 1]

            def context(head: str = head) -> object:
                with database.unit_of_work() as uow:
                    return uow.ledger.threads.read_context(head)

            def ancestry(head: str = head) -> object:
                with database.unit_of_work() as uow:
                    return uow.ledger.threads.read_ancestry(head)

            read = context()
            out[str(depth)] = {
                "context_ms": median_ms(context, repetitions),
                "rows_read": read.rows_read,  # type: ignore[attr-defined]
                "ancestry_ms": median_ms(ancestry, max(3, repetitions // 10)),
            }
        first, last = str(depths[0]), str(depths[-1])
        out["ratio"] = out[last]["context_ms"] / out[first]["context_ms"]
        return out
    finally:
        database.dispose()


def _table(results: dict[str, Any], depths: list[int]) -> str:
    lines = [
        "| database | repository commits/s | bare Core commits/s | ratio (target ≥ 0.80) "
        "| ratio quartiles |",
        "|---|---|---|---|---|",
    ]
    for name, found in results.items():
        c = found["commits"]
        low, high = c["ratio_quartiles"]
        lines.append(
            f"| {name} | {c['repository']:.0f} | {c['bare']:.0f} | {c['ratio']:.2f} "
            f"| {low:.2f}–{high:.2f} |"
        )
    header = " | ".join(f"depth {d:,}" for d in depths)
    lines += [
        "",
        f"| database | read | {header} | deepest / shallowest (target ≤ 2) |",
        "|---|---|" + "---|" * len(depths) + "---|",
    ]
    for name, found in results.items():
        reads = found["reads"]
        context = " | ".join(
            f"{reads[str(d)]['context_ms']:.2f} ms ({reads[str(d)]['rows_read']} rows)"
            for d in depths
        )
        ancestry = " | ".join(f"{reads[str(d)]['ancestry_ms']:.1f} ms" for d in depths)
        lines.append(f"| {name} | context | {context} | {reads['ratio']:.2f} |")
        lines.append(f"| {name} | full ancestry | {ancestry} | |")
    return "\n".join(lines)


def run(*, quick: bool, admin_url: str = DEFAULT_ADMIN_URL) -> dict[str, Any]:
    """Both databases: commits (repository vs bare Core) and context reads by depth."""
    rounds, per_round = (7, 50) if quick else (21, 150)
    depths = [100, 1_000] if quick else [100, 1_000, 10_000]
    repetitions = 20 if quick else 50
    results: dict[str, Any] = {"depths": depths}
    for name, database in (
        ("postgres", postgres_database(admin_url)),
        ("sqlite", sqlite_database()),
    ):
        with database as url:
            results[name] = {
                "commits": measure_commits(url, rounds=rounds, per_round=per_round),
                "reads": measure_reads(url, depths=depths, repetitions=repetitions),
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer, shallower")
    parser.add_argument("--postgres-url", default=DEFAULT_ADMIN_URL, help="admin URL")
    args = parser.parse_args()
    started = time.perf_counter()
    results = run(quick=args.quick, admin_url=args.postgres_url)
    depths = results.pop("depths")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ledger.json").write_text(json.dumps(results, indent=2))
    print(_table(results, depths))
    print(f"\n{time.perf_counter() - started:.0f} s; JSON in {RESULTS / 'ledger.json'}")


if __name__ == "__main__":
    main()
