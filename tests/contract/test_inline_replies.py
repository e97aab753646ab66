"""A reply sent by the run that committed its turn (outbound/inline.py), beside the task rung
at the commit: whichever takes a chunk first sends it, the other finds it taken, so the
person gets it once; what fails inline is retried by the task as before. Both databases,
real senders against the loopback fake platforms."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from nexus.adapters.scripted import Say
from nexus.ingest.service import ingest
from nexus.ledger.enums import DeliveryStatus, QueueMode
from nexus.ledger.records import NewQueueItem
from nexus.outbound.inline import InlineReplies, ReadyReply
from nexus.outbound.rate_limit import InProcessRateLimiter
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from tests.contract.outbound_support import (
    LONG_REPLY,
    OutboundRig,
    arrive_telegram,
    fake,
    message,
    rig,
)
from tests.fakes.platform_server import FakePlatforms, Received

__all__ = ["fake", "rig"]  # the fixtures, for pytest


def _turn(rig: OutboundRig, reply: str = "Hello back.") -> tuple[str, list[ReadyReply]]:
    """A turn answered as a session run does it: holding, so its reply is handed over."""
    session = rig.rig.session("dm:ent_tg")
    event = arrive_telegram(rig)
    with rig.inline.holding() as held:
        turn_id = rig.answer(session, event, reply)
    return turn_id, held


@dataclass
class Meanwhile:
    """A rate limiter that runs `then` once, inside the first reservation: the other path
    runs exactly between this path's first step and its taking the chunk."""

    then: Callable[[], object]
    inner: InProcessRateLimiter
    ran: object = None
    done: bool = False

    def reserve(self, key: str, per_second: float) -> int:
        if not self.done:
            self.done = True
            self.ran = self.then()
        return self.inner.reserve(key, per_second)


def test_the_run_sends_the_reply_and_the_task_rung_at_commit_finds_it_sent(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig)
    [ready] = held
    [row] = rig.deliveries(turn_id)
    assert ready == ReadyReply((row.id,), "telegram")
    assert rig.doorbell.deliveries == [(row.id, 0)]  # the backup ring, as before
    assert rig.inline.send(held) == ["sent"]
    assert rig.pump() == ["skipped"]
    assert len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)


def test_a_reply_the_task_sent_first_is_not_sent_again_by_the_run(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig)
    assert rig.pump() == ["sent"]
    assert rig.inline.send(held) == ["skipped"]
    assert len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)


def test_the_run_sending_while_the_task_is_between_its_read_and_its_claim(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    """The task read the chunk pending; the run sends it before the task claims it."""
    turn_id, held = _turn(rig)
    meanwhile = Meanwhile(lambda: rig.inline.send(held), InProcessRateLimiter(burst=1_000))
    rig.service.limiter = meanwhile
    assert rig.pump() == ["skipped"]
    assert meanwhile.ran == ["sent"]
    assert len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)


def test_the_task_sending_while_the_run_is_about_to_claim(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    """The run booked its rate slot; the task sends the chunk before the run claims it."""
    turn_id, held = _turn(rig)
    meanwhile = Meanwhile(rig.pump, InProcessRateLimiter(burst=1_000))
    rig.service.limiter = meanwhile
    assert rig.inline.send(held) == ["skipped"]
    assert meanwhile.ran == ["sent"]
    assert len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)


def test_a_long_reply_goes_out_whole_with_its_turn_in_order(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig, LONG_REPLY)
    assert rig.inline.send(held) == ["sent", "sent", "sent"]
    # Each chunk sent rang the next as well (should the run stop in between): all skipped.
    assert rig.pump() == ["skipped", "skipped", "skipped"]
    sent = fake.of("telegram")
    assert len(sent) == 3
    assert [m.body.get("reply_parameters", {}).get("message_id") for m in sent] == [77, None, None]
    rows = rig.deliveries(turn_id)
    assert [(r.chunk_index, r.status, r.attempts) for r in rows] == [
        (0, DeliveryStatus.SENT, 1),
        (1, DeliveryStatus.SENT, 1),
        (2, DeliveryStatus.SENT, 1),
    ]


def test_a_reply_that_fails_inline_is_retried_by_the_task_after_its_backoff(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig)
    fake.fail_next("telegram", 502, {"ok": False, "description": "Bad Gateway"})
    assert rig.inline.send(held) == ["retry"]
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.PENDING, 1)
    commit_ring, retry_ring = rig.doorbell.deliveries
    assert commit_ring == (row.id, 0) and retry_ring[0] == row.id and retry_ring[1] > 0
    # The commit's ring finds the chunk backing off; the retry's ring, after it, sends it.
    assert rig.pump() == ["skipped", "sent"]
    assert len(fake.requests) == 2 and len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 2)


def test_a_refused_reply_fails_once_inline_as_it_would_in_the_task(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig)
    fake.fail_next("telegram", 403, {"ok": False, "description": "Forbidden: bot was blocked"})
    assert rig.inline.send(held) == ["failed"]
    assert rig.pump() == ["skipped"]
    assert len(fake.requests) == 1
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.FAILED and "blocked" in (row.error or "")


def test_an_inline_send_that_breaks_raises_nothing_and_leaves_it_to_the_task(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    turn_id, held = _turn(rig)
    working = rig.service.limiter

    class Unreachable:
        def reserve(self, key: str, per_second: float) -> int:
            raise ConnectionError("Redis is out of reach")

    rig.service.limiter = Unreachable()
    assert rig.inline.send(held) == []
    rig.service.limiter = working
    assert rig.pump() == ["sent"]
    assert len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)


def test_only_the_thread_that_holds_collects_and_only_while_it_holds(
    rig: OutboundRig,
) -> None:
    inline = InlineReplies(rig.service)
    inline.ready(["a"], "telegram")  # nobody holds: the rung task sends it
    other: list[list[ReadyReply]] = []
    with inline.holding() as held:

        def elsewhere() -> None:
            with inline.holding() as theirs:
                inline.ready(["b"], "slack")
            other.append(theirs)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        inline.ready(["c", "d"], "telegram")
        inline.ready([], "telegram")  # nothing stored: nothing to send
    inline.ready(["e"], "telegram")
    assert held == [ReadyReply(("c", "d"), "telegram")]
    assert other == [[ReadyReply(("b",), "slack")]]


def test_a_session_run_sends_each_reply_before_its_next_turns_model_call(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    """Five messages queued for one session (`queue` mode: a turn each), one run: each
    reply reaches the platform after its turn's model call and before the next one."""
    session = rig.rig.session("dm:ent_tg")
    with rig.database.unit_of_work() as uow:
        for number in range(1, 6):
            event = message(
                f"telegram:{number}", "telegram", "4242", f"m{number}", message_id=f"{100 + number}"
            )
            ingest(uow, [event], rig.doorbell)
            item = NewQueueItem(session_id=session.id, event_id=event.id, mode=QueueMode.QUEUE)
            uow.ledger.queue.enqueue(item)
        uow.commit()
    for number in range(1, 6):
        rig.rig.model.push(Say(f"Answer {number}."))
    calls_at_reply: list[int] = []

    def look(request: Received) -> None:
        calls_at_reply.append(len(rig.rig.model.requests))

    fake.on_request = look
    runner = SessionRunner(
        database=rig.database,
        turns=rig.rig.turns,
        coordination=InProcessCoordination(),
        doorbell=rig.doorbell,
        clock=rig.clock,
        replies=rig.inline,
    )
    report = runner.run(session.id)
    assert (report.status, report.turns) == ("done", 5)
    assert calls_at_reply == [1, 2, 3, 4, 5]
    sent = fake.of("telegram")
    assert [m.body["text"] for m in sent] == [f"Answer {n}." for n in range(1, 6)]
    assert [m.body["reply_parameters"]["message_id"] for m in sent] == [101, 102, 103, 104, 105]
    # The commits' rings, the backup: each finds its reply sent.
    assert rig.pump() == ["skipped"] * 5
    assert len(fake.requests) == 5
