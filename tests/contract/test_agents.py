"""Manager and worker agents on the ledger: dispatch, results back, depth limit, tree links."""

from __future__ import annotations

from nexus.adapters.scripted import CallTools, Say
from nexus.agents.tree import session_tree
from nexus.db import Database
from nexus.ledger.enums import QueueMode, SessionOrigin
from nexus.ledger.records import NewSession
from tests.contract.agent_support import ask, build_office, workers_of
from tests.support import FakeClock


def test_a_manager_dispatches_two_workers_and_sees_both_results(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    office.model.push(
        CallTools(
            (
                ("agent_send", {"op": "dispatch", "text": "price the flights"}),
                ("agent_send", {"op": "dispatch", "text": "price the hotels"}),
            )
        ),
        Say("I have asked two workers."),
    )
    ask(office, office.manager.id, "plan the Lisbon trip", "api:trip")
    assert office.runner.run(office.manager.id).turns == 1
    workers = workers_of(office)
    assert len(workers) == 2
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(office.manager.id)
        assert head is not None
        dispatching = uow.ledger.threads.get_turn(head.thread_id or "")
    assert dispatching is not None
    for worker, task in zip(workers, ("price the flights", "price the hotels"), strict=True):
        assert worker.origin == SessionOrigin.SUBAGENT and worker.label.startswith("worker:")
        assert worker.parent_session_label == office.manager.label
        assert worker.parent_turn_id == dispatching.turn.id
        assert worker.persona_id == office.manager.persona_id  # persona inherited
        assert worker.spawn_tool_call_id in {c.id for c in dispatching.tool_calls}
        assert worker.task_description == task
    with database.unit_of_work() as uow:
        tree = session_tree(uow.ledger, office.manager.label)
        worker_tree = session_tree(uow.ledger, workers[0].label)
    (turn,) = tree["turns"]
    assert [(b["kind"], b["session"]) for b in turn["branches"]] == [
        ("worker", w.label) for w in workers
    ]
    assert (worker_tree["parent"], worker_tree["parent_turn"]) == (
        office.manager.label,
        dispatching.turn.id,
    )
    office.model.push(Say("flights: 320 EUR"))
    office.runner.run(workers[0].id)
    office.model.push(Say("hotels: 4 nights at 95 EUR"))
    office.runner.run(workers[1].id)
    office.model.push(Say("noted the flights"), Say("Total: about 700 EUR."))
    assert office.runner.run(office.manager.id).turns == 2  # followup: one result per turn
    final = office.model.requests[-1]
    said = str(final.messages)
    assert "flights: 320 EUR" in said and "hotels: 4 nights at 95 EUR" in said
    assert "[worker_result]" in said


def test_a_dispatch_beyond_the_depth_limit_is_a_tool_error(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock, max_depth=3)
    parent = office.manager
    with database.unit_of_work() as uow:  # workers at depth 1, 2 and 3
        for depth in (1, 2, 3):
            parent = uow.ledger.sessions.create(
                NewSession(
                    label=f"worker:depth{depth}",
                    persona_id=parent.persona_id,
                    origin=SessionOrigin.SUBAGENT,
                    parent_session_label=parent.label,
                    queue_mode=QueueMode.QUEUE,
                )
            )
        uow.commit()
    office.model.push(
        CallTools((("agent_send", {"op": "dispatch", "text": "go deeper"}),)),
        Say("I cannot go deeper."),
    )
    ask(office, parent.id, "dig", "api:dig")
    office.runner.run(parent.id)
    results = office.model.requests[1].messages[-1]["content"]
    assert results[0]["is_error"] is True and "depth 4" in results[0]["content"]
    assert len(workers_of(office)) == 3  # nothing was created


def test_a_worker_that_keeps_failing_still_reports_to_its_parent(
    database: Database, clock: FakeClock
) -> None:
    from nexus.adapters.scripted import Fail
    from nexus.engine.model import ModelError

    office = build_office(database, clock)
    with database.unit_of_work() as uow:
        worker = uow.ledger.sessions.create(
            NewSession(
                label="worker:fragile",
                persona_id=office.manager.persona_id,
                origin=SessionOrigin.SUBAGENT,
                parent_session_label=office.manager.label,
            )
        )
        uow.commit()
    ask(office, worker.id, "do the thing", "api:fragile")
    down = ModelError("model_error", "overloaded", retryable=True)
    office.model.push(Fail(down), Fail(down), Fail(down))
    for _ in range(3):
        office.runner.run(worker.id)
        clock.advance(60_000)
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(office.manager.id)
        event = uow.ledger.events.get(items[0].event_id or "") if items else None
    assert event is not None and event.text is not None
    assert event.text.startswith("[worker_result] worker:fragile failed")
