"""Bursts in every queue mode while every process reaches Redis and Postgres over a slow,
lossy link (tests/reliability/links.py).

One `nexus api` and two Celery workers (the API's webhooks, the router, the session runs
and the deliveries) reach Redis (coordination and broker) through one `Link` and Postgres
through another, each 0.5 ms one way and 0.5 ms back (1 ms round trip) with 1 % of chunks
held back 200 ms (Linux's minimum retransmission timeout: a lost segment is a stall, not
lost bytes). The processes are started once; each queue mode is a session's own
(`sessions.queue_mode`), so one run covers the six modes, their bursts interleaved: Telegram
webhooks through the API, each sender's DM a session. The invariant checker reads the
ledger (and what the fake platform received) afterwards; each mode keeps its own promise
(test_queue_modes.py's). `NEXUS_SLOW_LINKS_SECONDS`: send burst after burst until that long
has passed (each settled before the next).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from nexus.db import Database
from nexus.ledger.enums import OPEN_QUEUE_STATUSES, QueueMode, TurnStatus
from nexus.ledger.records import NewSession, QueueItemRecord, TurnView
from nexus.ledger.repository.identity import auto_entity_id
from tests.fakes.platform_server import FakePlatforms
from tests.integration.processes import telegram_update
from tests.integration.worker_process import wait_for, worker_environment
from tests.reliability.links import Link
from tests.reliability.partition_support import (
    deploy,
    postgres_target,
    postgres_through,
    redis_target,
    redis_url_through,
    replies_sent,
)
from tests.reliability.scale import pick
from tests.reliability.test_queue_modes import ALLOWED
from tests.reliability.watch import InvariantWatch

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
SECRET = "slow-links-telegram-secret"
ONE_WAY_MS = 0.5  # each direction: a 1 ms round trip
LOSS = 0.01
RETRANSMIT_MS = 200
MESSAGES = pick(16, 200)  # per session and burst
SESSIONS = pick(1, 3)  # per mode
QUEUES = "events,sessions,delivery"  # no timer: the workers' watchdog, no beat
SECONDS = float(os.environ.get("NEXUS_SLOW_LINKS_SECONDS", "0"))


@dataclass
class Session:
    mode: QueueMode
    sender: int
    id: str = ""
    sent: int = 0
    settled_s: list[float] = field(default_factory=list)  # per burst, from its start


def _environment(
    database: Database, platforms: FakePlatforms, pg: Link, redis: Link
) -> dict[str, str]:
    """Every Redis and Postgres address a process has, through the links."""
    redis_url = redis_url_through(redis)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
        **worker_environment(database.url),
        **postgres_through(pg, database),
        "NEXUS_REDIS_URL": redis_url,
        "NEXUS_BROKER_URL": redis_url,
        "NEXUS_TELEGRAM_SECRET_TOKEN": SECRET,
        "NEXUS_TELEGRAM_BOT_TOKEN": "123:slow-links",
        "NEXUS_TELEGRAM_API_BASE": platforms.base_url,
        "NEXUS_SESSION_LEASE_MS": "2000",  # renewed across many 200 ms stalls
        # Every model call (the offline scripted model) takes this long, so a burst's
        # interrupts and steers reach running turns, over the Redis link.
        "NEXUS_SCRIPTED_DELAY_MS": "150",
        "NEXUS_QUEUE_CAP": "100000",  # order and batching, not overflow
    }


def _open_sessions(database: Database) -> list[Session]:
    """Each mode's sessions: Telegram DMs whose own queue mode is that mode."""
    sessions = [
        Session(mode, sender=index * SESSIONS + k)
        for index, mode in enumerate(QueueMode)
        for k in range(SESSIONS)
    ]
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        for session in sessions:
            label = f"dm:{auto_entity_id('telegram', str(7000 + session.sender))}"
            session.id = uow.ledger.sessions.ensure(
                NewSession(label=label, persona_id=persona.id, queue_mode=session.mode)
            ).id
        uow.commit()
    return sessions


def _open_counts(database: Database) -> dict[str, tuple[int, int]]:
    """Per session: inputs queued so far, and how many of them are still open."""
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT session_id, count(*), count(*) FILTER (WHERE status IN ('queued', 'claimed'))"
            " FROM queue_items GROUP BY session_id"
        ).all()
    return {str(sid): (int(total), int(open_)) for sid, total, open_ in rows}


def _reply_lag(database: Database) -> str:
    """How long after its turn's commit each reply's first chunk was recorded sent, from
    the ledger's clocks (what is printed, not what is asserted)."""
    with database.reading() as uow:
        lags = sorted(
            int(lag)
            for lag in uow.connection.exec_driver_sql(
                "SELECT d.updated_at - t.completed_at FROM deliveries d"
                " JOIN turns t ON t.id = d.turn_id"
                " WHERE d.chunk_index = 0 AND d.status = 'sent'"
            ).scalars()
        )
    if not lags:
        return "no replies sent"

    def at(share: float) -> float:
        return lags[min(len(lags) - 1, int(share * len(lags)))] / 1000

    return (
        f"{len(lags)} replies sent after their turns' commits: median {at(0.5):.2f} s, "
        f"p90 {at(0.9):.2f} s, slowest {lags[-1] / 1000:.2f} s"
    )


def _ledger(database: Database, session_id: str) -> tuple[list[QueueItemRecord], list[TurnView]]:
    with database.reading() as uow:
        session = uow.ledger.sessions.get(session_id)
        assert session is not None
        items = uow.ledger.queue.for_session(session_id)
        head = session.thread_id
        return items, uow.ledger.threads.read_ancestry(head) if head else []


def _burst(client: httpx.Client, sessions: list[Session], first_update: int, count: int) -> int:
    """`count` webhooks to every session, interleaved, eight at a time; the next update."""
    sends = [(session, session.sent + n) for n in range(count) for session in sessions]

    def post(position: int) -> None:
        session, n = sends[position]
        number = first_update + position
        text = f"{session.mode.value}/{session.sender} #{n}"
        sent = client.post(
            "/v1/inbound/telegram",
            json=telegram_update(number, session.sender, text=text),
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        )
        assert sent.status_code == 200, sent.text

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(post, range(len(sends))))
    for session in sessions:
        session.sent += count
    return first_update + len(sends)


def _settle(database: Database, sessions: list[Session], started: float) -> None:
    """Wait until every session has all it was sent, each with a disposition; note when each
    got there."""
    pending = {session.id: session for session in sessions}

    def settled() -> bool:
        counts = _open_counts(database)
        for sid, session in list(pending.items()):
            total, open_ = counts.get(sid, (0, 1))
            if total >= session.sent and open_ == 0:
                session.settled_s.append(time.monotonic() - started)
                del pending[sid]
        return not pending

    wait_for(settled, timeout=60 + len(sessions) * MESSAGES, what="every burst settled")


def _check_mode(
    database: Database, session: Session, replies: int
) -> tuple[Counter[str], Counter[str]]:
    """The mode's own promise (test_queue_modes.py), and one reply on the platform per
    completed turn (`replies`: the session's); its dispositions and its chain's turns by
    status."""
    items, chain = _ledger(database, session.id)
    mode, where = session.mode, f"{session.mode.value} session of sender {session.sender}"
    assert len(items) == session.sent, where
    assert not [i for i in items if i.status in OPEN_QUEUE_STATUSES], where
    dispositions = Counter(str(i.disposition) for i in items)
    assert {i.disposition for i in items} <= ALLOWED[mode], (where, dispositions)
    assert {i.consumed_by_turn_id for i in items} <= {view.turn.id for view in chain}, where
    statuses = [view.turn.status for view in chain]
    assert statuses and statuses[-1] == TurnStatus.COMPLETED, (where, statuses)
    if mode in (QueueMode.QUEUE, QueueMode.FOLLOWUP):
        assert len(chain) == session.sent, (where, len(chain))
    if mode == QueueMode.COLLECT:
        assert len(chain) < session.sent // 2, f"{where}: collect should have batched the burst"
    if mode != QueueMode.INTERRUPT:  # nothing else aborts a turn
        assert set(statuses) == {TurnStatus.COMPLETED}, (where, statuses)
    assert statuses.count(TurnStatus.COMPLETED) == replies, (where, replies, statuses)
    return dispositions, Counter(str(status) for status in statuses)


def test_bursts_in_every_mode_over_slow_lossy_links_to_redis_and_postgres(
    pg_database: Database, invariants: InvariantWatch, tmp_path: Path
) -> None:
    database = pg_database
    with (
        FakePlatforms() as platforms,
        Link(redis_target()) as redis_link,
        Link(postgres_target(database)) as pg_link,
        ExitStack() as stack,
    ):
        invariants.watch(database, platforms=platforms)
        links = {"redis": redis_link, "postgres": pg_link}
        for link in links.values():
            link.delay(up_ms=ONE_WAY_MS, down_ms=ONE_WAY_MS)
            link.loss(LOSS, retransmit_ms=RETRANSMIT_MS)
        sessions = _open_sessions(database)
        environment = _environment(database, platforms, pg_link, redis_link)
        started = time.monotonic()
        client = deploy(stack, tmp_path, environment, [environment] * 2, queues=QUEUES).client
        print(f"\nthe API and two workers up in {time.monotonic() - started:.1f} s")
        # One message each first: every session's first turn, and warm workers, so that the
        # burst's interrupts and steers find turns running (a cold worker's first routing
        # takes seconds here, and a signal raised before a turn's claim is not for it).
        update = _burst(client, sessions, 0, 1)
        _settle(database, sessions, time.monotonic())
        for session in sessions:
            session.settled_s.clear()  # the bursts' times only
        bursts, first = 0, time.monotonic()
        while bursts == 0 or time.monotonic() - first < SECONDS:
            burst_started = time.monotonic()
            update = _burst(client, sessions, update, MESSAGES)
            sent_s = time.monotonic() - burst_started
            _settle(database, sessions, burst_started)
            bursts += 1
            print(f"burst {bursts}: {update} webhooks so far, this one sent in {sent_s:.1f} s")
        # Each reply leaves with its turn (the run sends it before its next turn), so the
        # replies are out about when the inputs settle; the wait allows for retries.
        settled_at = time.monotonic()
        total = sum(s.sent for s in sessions)
        wait_for(lambda: replies_sent(database), timeout=60 + total / 5, what="every reply sent")
        print(
            f"every reply sent {time.monotonic() - settled_at:.1f} s after the last input settled"
        )
        print(_reply_lag(database))
        replies = Counter(int(m.body["chat_id"]) - 7000 for m in platforms.of("telegram"))
        for mode in QueueMode:
            of_mode = [s for s in sessions if s.mode == mode]
            dispositions: Counter[str] = Counter()
            turns: Counter[str] = Counter()
            for session in of_mode:
                found, chain = _check_mode(database, session, replies[session.sender])
                dispositions += found
                turns += chain
            slowest = max(max(s.settled_s) for s in of_mode)
            print(
                f"{mode.value:>13}: {sum(s.sent for s in of_mode)} messages, settled within "
                f"{slowest:.1f} s of a burst's start; turns {dict(turns)}, "
                f"{sum(replies[s.sender] for s in of_mode)} replies; {dict(dispositions)}"
            )
        for name, link in links.items():
            print(
                f"{name} link: {link.connections} connections, {link.chunks} chunks, "
                f"{link.held} held back {RETRANSMIT_MS} ms"
            )
        assert all(link.held > 0 for link in links.values())  # the loss was there to see
        invariants.check(database)
