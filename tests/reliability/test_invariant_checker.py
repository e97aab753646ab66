"""The invariant checker finds each kind of broken ledger, and passes a sound one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Connection

from nexus.db import Database, UnitOfWork
from nexus.ids import new_id
from nexus.ledger.enums import Disposition, MessageRole, QueueMode, ToolCallStatus, TurnStatus
from nexus.ledger.records import (
    ConsumedItem,
    DeliveryDraft,
    EventDraft,
    MessageDraft,
    NewQueueItem,
    SessionRecord,
    ToolCallDraft,
    TurnDraft,
)
from tests.reliability.invariants import (
    Baseline,
    PlatformMessage,
    check_invariants,
    install_guards,
    take_baseline,
)
from tests.support import FakeClock, new_session

pytestmark = pytest.mark.postgres


@pytest.fixture
def invariants() -> None:
    """These tests call the checker themselves, on ledgers broken on purpose."""


@dataclass
class Scene:
    """One transaction that is never committed: build, break, check, roll back."""

    uow: UnitOfWork
    clock: FakeClock
    session: SessionRecord
    baseline: Baseline

    @property
    def connection(self) -> Connection:
        return self.uow.connection

    def event(self, name: str, direction: str = "inbound") -> str:
        event_id = f"test:{name}"
        self.uow.ledger.events.insert(
            EventDraft(
                id=event_id,
                adapter="test",
                platform="test",
                direction=direction,
                text=name,
                occurred_at=0,
            )
        )
        return event_id

    def queue(self, name: str) -> str:
        event_id = self.event(name)
        self.uow.ledger.events.mark_processed(event_id, "queued", "test")
        item_id, _ = self.uow.ledger.queue.enqueue(
            NewQueueItem(session_id=self.session.id, event_id=event_id, mode=QueueMode.QUEUE)
        )
        self.clock.advance(10)
        return item_id

    def turn(
        self,
        *items: str,
        parent: str | None = "head",
        tools: bool = False,
        dangling: bool = False,
        status: TurnStatus = TurnStatus.COMPLETED,
    ) -> str:
        """One run: claim (epoch + 1), take 100 ms, commit; answers `items` in order."""
        current = self.uow.ledger.sessions.get(self.session.id)
        assert current is not None
        epoch = self.uow.ledger.sessions.claim(self.session.id)
        started = self.clock.now
        self.clock.advance(100)
        records = [self.uow.ledger.queue.get(i) for i in items]
        messages = [
            MessageDraft(role=MessageRole.USER, content={"text": "q"}, event_id=r.event_id)
            for r in records
            if r is not None
        ]
        calls: list[ToolCallDraft] = []
        if tools:
            messages.append(
                MessageDraft(role=MessageRole.TOOL_CALL, content={"id": "tu1"}, tool_call_id="tu1")
            )
            if not dangling:
                messages.append(
                    MessageDraft(
                        role=MessageRole.TOOL_RESULT, content={"result": 1}, tool_call_id="tu1"
                    )
                )
            calls.append(
                ToolCallDraft(
                    provider_call_id="tu1",
                    tool_name="current_time",
                    parameters={},
                    status=ToolCallStatus.PENDING if dangling else ToolCallStatus.COMPLETED,
                    started_at=started,
                )
            )
        messages.append(MessageDraft(role=MessageRole.ASSISTANT, content={"text": "a"}))
        draft = TurnDraft(
            id=new_id(),
            session_id=self.session.id,
            parent_turn_id=current.thread_id if parent == "head" else parent,
            status=status,
            started_at=started,
            model="scripted",
            messages=tuple(messages),
            tool_calls=tuple(calls),
            consumed=tuple(
                ConsumedItem(queue_item_id=i, disposition=Disposition.CONSUMED) for i in items
            ),
        )
        if status in (TurnStatus.FAILED, TurnStatus.SUPERSEDED):
            self.uow.ledger.turns.record_attempt(draft, epoch=epoch)
        else:
            assert self.uow.ledger.turns.commit(draft, epoch=epoch).committed
        self.clock.advance(10)
        return draft.id

    def check(self, **options: object) -> list[str]:
        return check_invariants(
            self.connection,
            baseline=self.baseline,
            now_ms=self.clock.now,
            **options,  # type: ignore[arg-type]
        )


@pytest.fixture
def scene(pg_database: Database, clock: FakeClock) -> Iterator[Scene]:
    with pg_database.unit_of_work() as uow:
        install_guards(uow.connection)
        baseline = take_baseline(uow.connection)
        session = new_session(uow.ledger)
        yield Scene(uow, clock, session, baseline)
        # Never committed: the guards and the broken rows roll back with the transaction.


def _sound(scene: Scene) -> list[str]:
    """Three questions answered in order, one of them with a tool call."""
    first, second, third = scene.queue("one"), scene.queue("two"), scene.queue("three")
    scene.turn(first)
    turn = scene.turn(second, tools=True)
    scene.turn(third)
    scene.uow.ledger.deliveries.add(
        [
            DeliveryDraft(
                turn_id=turn,
                chunk_index=0,
                session_id=scene.session.id,
                event_id=scene.event("reply", "outbound"),
                platform="telegram",
                target={"chat_id": 1},
                text="a",
            )
        ]
    )
    return [first, second, third]


def test_a_sound_ledger_has_no_violations(scene: Scene) -> None:
    _sound(scene)
    assert scene.check(platform_messages=[PlatformMessage("telegram", "a")]) == []


def test_a_rollback_and_the_turn_after_it_keep_the_ledger_sound(scene: Scene) -> None:
    """A rollback takes the turns after its target off the chain (kept, `abandoned_at`)
    and records the move; a new turn then extends the target: no violation."""
    _sound(scene)
    sessions = scene.uow.ledger.sessions
    chain = [t.turn.id for t in scene.uow.ledger.threads.read_ancestry(_head(scene))]
    epoch = sessions.lock(scene.session.id)
    assert sessions.move_head(
        scene.session.id,
        chain[0],
        epoch=epoch,
        expected=chain[-1],
        reason="rollback",
        abandoned=chain[1:],
    )
    scene.turn(scene.queue("four"))
    assert scene.check() == []


def test_a_forked_chain_is_reported(scene: Scene) -> None:
    _sound(scene)
    chain = [t for t in scene.uow.ledger.threads.read_ancestry(_head(scene))]
    # What the partial unique index prevents: a second committed child of the same parent.
    scene.connection.exec_driver_sql("DROP INDEX uq_turns_chain_child")
    scene.connection.exec_driver_sql(
        "INSERT INTO turns (id, session_id, parent_turn_id, turn_type, status, epoch, "
        f"started_at, completed_at) VALUES ('{new_id()}', '{scene.session.id}', "
        f"'{chain[0].turn.id}', 'normal', 'completed', 1, 0, 0)"
    )
    problems = scene.check()
    assert any("2 committed turns extend" in p for p in problems), problems
    assert any("is not on the chain from its head" in p for p in problems), problems
    assert any("has no thread row" in p for p in problems), problems


def test_a_tool_use_without_a_result_is_reported(scene: Scene) -> None:
    scene.turn(scene.queue("one"), tools=True, dangling=True)
    problems = scene.check()
    assert any("tool_use tu1 has 0 results" in p for p in problems), problems
    assert any("tool call tu1 is still pending" in p for p in problems), problems


def test_an_expired_claim_and_an_unanswered_input_are_reported(scene: Scene) -> None:
    claimed, waiting = scene.queue("claimed"), scene.queue("waiting")
    epoch = scene.uow.ledger.sessions.claim(scene.session.id)
    scene.uow.ledger.queue.claim_ids([claimed], epoch=epoch, lease_ms=1_000)
    scene.event("never-routed")
    scene.clock.advance(5_000)
    problems = scene.check()
    assert any(p.startswith("[claims]") and claimed in p for p in problems), problems
    assert any(f"{waiting} (event 'test:waiting') is still queued" in p for p in problems)
    assert any("'test:never-routed' was never routed" in p for p in problems), problems
    # Mid-scenario (not settled) open items are fine, an expired claim is not.
    unsettled = scene.check(settled=False)
    assert [p for p in unsettled if not p.startswith("[claims]")] == []


def test_a_consumed_item_must_name_a_committed_turn(scene: Scene) -> None:
    item = scene.queue("one")
    attempt = scene.turn(status=TurnStatus.SUPERSEDED)
    scene.connection.exec_driver_sql(
        "UPDATE queue_items SET status = 'done', disposition = 'consumed', "
        f"consumed_by_turn_id = '{attempt}' WHERE id = '{item}'"
    )
    problems = scene.check()
    assert any("which is not a committed turn of its session" in p for p in problems), problems


def test_two_runs_at_once_are_reported(scene: Scene) -> None:
    _sound(scene)
    head = _head(scene)
    scene.connection.exec_driver_sql(f"UPDATE turns SET started_at = 0 WHERE id = '{head}'")
    problems = scene.check()
    assert any(p.startswith("[one run]") and head in p for p in problems), problems


def test_an_epoch_going_down_is_reported(scene: Scene) -> None:
    _sound(scene)
    scene.connection.exec_driver_sql(
        f"UPDATE sessions SET epoch = 1 WHERE id = '{scene.session.id}'"
    )
    problems = scene.check()
    assert any("an epoch went down" in p and "3 -> 1" in p for p in problems), problems
    assert any("is at epoch 1 but a turn ran at 3" in p for p in problems), problems


def test_deleted_ledger_rows_are_reported(scene: Scene) -> None:
    _sound(scene)
    scene.connection.exec_driver_sql(
        "DELETE FROM messages WHERE id = (SELECT min(id) FROM messages)"
    )
    problems = scene.check()
    assert any("DELETE on messages" in p for p in problems), problems


def test_a_message_sent_twice_is_reported(scene: Scene) -> None:
    _sound(scene)
    twice = [PlatformMessage("telegram", "a"), PlatformMessage("telegram", "a")]
    problems = scene.check(platform_messages=twice)
    assert any("received 'a' 2 times" in p for p in problems), problems


def test_answers_out_of_arrival_order_are_reported(scene: Scene) -> None:
    first, second = scene.queue("first"), scene.queue("second")
    scene.turn(second)
    scene.turn(first)
    problems = scene.check()
    assert any("'test:first' was queued" in p or "'test:second' was queued" in p for p in problems)


def test_an_input_answered_twice_is_reported(scene: Scene) -> None:
    item = scene.queue("once")
    scene.turn(item)
    event_id = scene.uow.ledger.queue.get(item).event_id  # type: ignore[union-attr]
    epoch = scene.uow.ledger.sessions.claim(scene.session.id)
    again = TurnDraft(
        id=new_id(),
        session_id=scene.session.id,
        parent_turn_id=_head(scene),
        started_at=scene.clock.now,
        messages=(MessageDraft(role=MessageRole.USER, content={"text": "q"}, event_id=event_id),),
    )
    assert scene.uow.ledger.turns.commit(again, epoch=epoch).committed
    problems = scene.check()
    assert any("was answered by 2 turns" in p for p in problems), problems


def _head(scene: Scene) -> str:
    current = scene.uow.ledger.sessions.get(scene.session.id)
    assert current is not None and current.thread_id is not None
    return current.thread_id


def test_an_input_left_in_an_aborted_turn_is_reported(scene: Scene) -> None:
    """Aborted, and nothing after it: its own arrival stopped it. Aborted and followed by a
    completed turn (a later input interrupted it): folded into that turn's answer, sound."""
    interrupted = scene.queue("interrupted")
    scene.turn(interrupted, status=TurnStatus.ABORTED)
    scene.turn(scene.queue("the interrupter"))
    assert scene.check() == []
    left = scene.queue("left")
    scene.turn(left, status=TurnStatus.ABORTED)
    problems = scene.check()
    assert [p for p in problems if p.startswith("[interrupt]")] == [
        f"[interrupt] queue items {left} of session {scene.session.label!r} were consumed by "
        f"the aborted turn {_head(scene)} and no later turn answered them"
    ], problems


def test_an_obligation_left_due_and_a_hook_called_twice_are_reported(scene: Scene) -> None:
    _sound(scene)
    scene.connection.exec_driver_sql(
        "INSERT INTO hooks (name, path, description, mode, enabled, breaker_state, "
        "consecutive_errors, state, created_at, updated_at) "
        "VALUES ('watch', 'watch.py', '', 'persistent', true, 'closed', 0, '{}', 0, 0)"
    )
    owed = scene.event("owed")  # stored while a hook is enabled: due
    assert scene.check(settled=False) == []  # on its way: not yet a fault
    # What the unique index forbids, so the check has something to find.
    scene.connection.exec_driver_sql("DROP INDEX ux_hook_invocations_event_id_hook_name")
    for invocation in ("01A", "01B"):
        scene.connection.exec_driver_sql(
            "INSERT INTO hook_invocations (id, hook_name, event_id, started_at, latency_ms, "
            f"fired) VALUES ('{invocation}', 'watch', 'test:one', 0, 1, false)"
        )
    problems = [p for p in scene.check() if p.startswith("[hooks]")]
    assert problems == [
        f"[hooks] event {owed!r} still owes the hooks its evaluation",
        "[hooks] hook 'watch' was evaluated 2 times on event 'test:one'",
    ], problems
