"""Queue-mode decisions and caps: pure functions over queue items."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import QueueItemRecord
from nexus.queueing.caps import over_cap
from nexus.queueing.modes import COMPACT, Idle, Run, WaitUntil, arrival_action, next_work
from nexus.queueing.settings import DEBOUNCE_KEY


def _item(
    n: int, mode: QueueMode, *, at: int | None = None, command: str | None = None
) -> QueueItemRecord:
    return QueueItemRecord(
        id=f"q{n:03d}",
        session_id="s",
        event_id=f"e{n}",
        mode=mode,
        priority=0,
        source=None,
        payload={"command": command} if command else {},
        status=QueueStatus.QUEUED,
        attempts=0,
        claimed_epoch=None,
        claim_expires_at=None,
        available_at=at if at is not None else n,
        disposition=None,
        disposition_detail=None,
        consumed_by_turn_id=None,
        enqueued_at=n,
    )


def test_followup_and_queue_take_one_item_at_a_time() -> None:
    plan = next_work([_item(1, QueueMode.QUEUE), _item(2, QueueMode.FOLLOWUP)], now_ms=10)
    assert isinstance(plan, Run) and [i.id for i in plan.items] == ["q001"]
    assert plan.disposition == Disposition.CONSUMED


def test_an_interrupt_batches_everything_queued() -> None:
    queued = [
        _item(1, QueueMode.FOLLOWUP),
        _item(2, QueueMode.QUEUE),
        _item(3, QueueMode.INTERRUPT),
    ]
    plan = next_work(queued, now_ms=10)
    assert isinstance(plan, Run) and len(plan.items) == 3
    assert (plan.mode, plan.disposition) == (QueueMode.INTERRUPT, Disposition.BATCHED)


def test_collect_waits_for_quiet_after_the_last_item() -> None:
    queued = [_item(1, QueueMode.COLLECT), _item(500, QueueMode.COLLECT)]
    assert next_work(queued, now_ms=1_000, collect_window_ms=1_000) == WaitUntil(at_ms=1_500)
    plan = next_work(queued, now_ms=1_500, collect_window_ms=1_000)
    assert isinstance(plan, Run) and plan.disposition == Disposition.BATCHED


def test_collect_waits_for_each_items_own_debounce_window() -> None:
    """An item that arrived under a session's or policy's debounce carries it; the others
    take the deployment's window."""
    slow = _item(500, QueueMode.COLLECT).model_copy(update={"payload": {DEBOUNCE_KEY: 5_000}})
    queued = [_item(1, QueueMode.COLLECT), slow]
    assert next_work(queued, now_ms=1_600, collect_window_ms=1_000) == WaitUntil(at_ms=5_500)
    plan = next_work(queued, now_ms=5_500, collect_window_ms=1_000)
    assert isinstance(plan, Run) and [i.id for i in plan.items] == ["q001", "q500"]
    quick = _item(2, QueueMode.COLLECT).model_copy(update={"payload": {DEBOUNCE_KEY: 0}})
    assert isinstance(next_work([quick], now_ms=2, collect_window_ms=1_000), Run)


def test_an_item_backing_off_holds_the_ones_behind_it() -> None:
    queued = [_item(1, QueueMode.QUEUE, at=5_000), _item(2, QueueMode.QUEUE)]
    assert next_work(queued, now_ms=100) == WaitUntil(at_ms=5_000)
    assert next_work([], now_ms=100) == Idle()


def test_a_compaction_runs_alone_when_oldest_and_no_batch_reaches_past_it() -> None:
    compaction = _item(2, QueueMode.QUEUE, command=COMPACT)
    first = next_work([_item(1, QueueMode.QUEUE), compaction], now_ms=10)
    assert isinstance(first, Run) and first.command is None
    assert [i.id for i in first.items] == ["q001"]
    alone = next_work([compaction, _item(3, QueueMode.INTERRUPT)], now_ms=10)
    assert isinstance(alone, Run) and alone.command == COMPACT
    assert [i.id for i in alone.items] == ["q002"]
    # An interrupt behind the compaction waits for it: what was asked first runs first.
    collect = [_item(1, QueueMode.COLLECT), compaction, _item(3, QueueMode.INTERRUPT)]
    batch = next_work(collect, now_ms=5_000)
    assert isinstance(batch, Run) and [i.id for i in batch.items] == ["q001"]
    assert batch.mode == QueueMode.COLLECT and batch.command is None


def test_arrival_actions() -> None:
    assert arrival_action(QueueMode.INTERRUPT) == "abort"
    assert arrival_action(QueueMode.STEER) == arrival_action(QueueMode.STEER_BACKLOG) == "steer"
    assert arrival_action(QueueMode.COLLECT) == arrival_action(QueueMode.QUEUE) == "none"


@given(
    size=st.integers(0, 40),
    cap=st.integers(1, 25),
    policy=st.sampled_from(["old", "new", "summarize"]),
)
def test_caps_drop_exactly_the_excess(size: int, cap: int, policy: str) -> None:
    waiting = [_item(n, QueueMode.QUEUE) for n in range(size)]
    decision = over_cap(waiting, cap=cap, policy=policy)  # type: ignore[arg-type]
    assert len(decision.dropped) == max(0, size - cap)
    kept = [item for item in waiting if item not in decision.dropped]
    if decision.dropped and policy == "new":
        assert kept == waiting[:cap]
    elif decision.dropped:
        assert kept == waiting[-cap:]
    assert decision.one_notice == (policy == "summarize" and size > cap)
