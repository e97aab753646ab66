"""A worker's task status through real runs: pending at dispatch, running while a run has its
input, completed when its answer reaches the parent, failed when its input is dead-lettered,
and running again when it gets more work; the dispatching call names the worker."""

from __future__ import annotations

import json
from typing import Any

from nexus.adapters.scripted import CallTools, Fail, Say
from nexus.db import Database
from nexus.engine.model import ModelError, ModelRequest
from nexus.ledger.enums import QueueStatus, SessionOrigin
from nexus.ledger.records import NewSession, SessionRecord
from tests.contract.agent_support import Office, ask, build_office, workers_of
from tests.support import FakeClock


def _status(database: Database, session_id: str) -> str | None:
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(session_id)
    assert session is not None
    return session.task_status


def _tool_result(request: ModelRequest) -> dict[str, Any]:
    """The first tool result the model was shown in `request`, decoded."""
    (result, *_) = request.messages[-1]["content"]
    assert result["is_error"] is False, result
    found: dict[str, Any] = json.loads(result["content"])
    return found


def _parent_results(office: Office) -> list[tuple[str, dict[str, Any]]]:
    """The worker results queued to the manager: (text, payload), oldest first."""
    with office.database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(office.manager.id)
        events = [uow.ledger.events.get(item.event_id or "") for item in items]
        return [
            (event.text or "", uow.ledger.events.payload_of(event.id))
            for event in events
            if event is not None and event.adapter == "agent"
        ]


def _dispatch(office: Office, task: str) -> SessionRecord:
    office.model.push(CallTools((("agent_send", {"op": "dispatch", "text": task}),)), Say("ok"))
    ask(office, office.manager.id, f"please: {task}", f"api:{task}")
    assert office.runner.run(office.manager.id).turns == 1
    (worker, *_) = [w for w in workers_of(office) if w.task_description == task]
    return worker


def test_the_dispatching_call_names_its_worker_and_the_task_starts_pending(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    worker = _dispatch(office, "count the chairs")
    assert worker.task_status == "pending"
    with database.unit_of_work() as uow:
        manager = uow.ledger.sessions.get(office.manager.id)
        assert manager is not None and manager.thread_id is not None
        dispatching = uow.ledger.threads.get_turn(manager.thread_id)
    assert dispatching is not None
    (call,) = dispatching.tool_calls
    assert call.tool_name == "agent_send"
    assert call.spawned_session_label == worker.label
    assert worker.spawn_tool_call_id == call.id  # and back: the forward and reverse lookups


def test_a_task_runs_completes_and_runs_again_when_more_work_comes(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    worker = _dispatch(office, "count the chairs")
    # The worker looks at itself mid-turn: its task is running.
    office.model.push(CallTools((("get_agent_status", {"session": worker.label}),)), Say("12"))
    assert office.runner.run(worker.id).turns == 1
    seen = _tool_result(office.model.requests[-1])
    assert (seen["task"], seen["task_status"]) == ("count the chairs", "running")
    assert _status(database, worker.id) == "completed"
    ((text, payload),) = _parent_results(office)
    assert text == f"[worker_result] {worker.label} reports: 12"
    assert (payload["task_status"], payload["failed"]) == ("completed", False)
    # The manager reads the result, checks on the worker, and gives it more work.
    office.model.push(
        CallTools(
            (
                ("get_agent_status", {"session": worker.label}),
                ("send_message_to_agent", {"to": worker.label, "text": "and the tables?"}),
            )
        ),
        Say("asked about the tables"),
    )
    assert office.runner.run(office.manager.id).turns == 1
    manager_sees = _tool_result(office.model.requests[-1])
    assert manager_sees["task_status"] == "completed"
    assert manager_sees["workers"] == []  # a worker dispatched none of its own
    assert _status(database, worker.id) == "completed"  # queued, not claimed yet
    office.model.push(CallTools((("get_agent_status", {"session": worker.label}),)), Say("3"))
    assert office.runner.run(worker.id).turns == 1
    assert _tool_result(office.model.requests[-1])["task_status"] == "running"
    assert _status(database, worker.id) == "completed"
    # The manager asks about itself: its workers and where they stand.
    office.model.push(
        CallTools((("get_agent_status", {"session": office.manager.label}),)), Say("all done")
    )
    assert office.runner.run(office.manager.id).turns == 1
    assert _tool_result(office.model.requests[-1])["workers"] == [
        {"session": worker.label, "task": "count the chairs", "task_status": "completed"}
    ]


def test_a_task_fails_when_its_input_is_dead_lettered_and_recovers_with_new_work(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    with database.unit_of_work() as uow:
        worker = uow.ledger.sessions.create(
            NewSession(
                label="worker:fragile",
                persona_id=office.manager.persona_id,
                origin=SessionOrigin.SUBAGENT,
                parent_session_label=office.manager.label,
                task_description="do the thing",
            )
        )
        uow.commit()
    assert worker.task_status == "pending"
    ask(office, worker.id, "do the thing", "api:fragile")
    down = ModelError("model_error", "overloaded", retryable=True)
    office.model.push(Fail(down), Fail(down), Fail(down))
    office.runner.run(worker.id)
    assert _status(database, worker.id) == "running"  # failed once: waiting for its retry
    for _ in range(2):
        clock.advance(60_000)
        office.runner.run(worker.id)
    assert _status(database, worker.id) == "failed"
    with database.unit_of_work() as uow:
        (dead,) = uow.ledger.queue.for_session(worker.id)
    assert dead.status == QueueStatus.DEAD
    ((text, payload),) = _parent_results(office)
    assert text.startswith("[worker_result] worker:fragile failed")
    assert (payload["task_status"], payload["failed"]) == ("failed", True)
    ask(office, worker.id, "try once more", "api:again")
    office.model.push(CallTools((("get_agent_status", {"session": worker.label}),)), Say("done"))
    assert office.runner.run(worker.id).turns == 1
    assert _tool_result(office.model.requests[-1])["task_status"] == "running"
    assert _status(database, worker.id) == "completed"


def test_sessions_that_are_no_workers_never_get_a_task_status(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    office.model.push(Say("hello"))
    ask(office, office.manager.id, "hi", "api:hi")
    assert office.runner.run(office.manager.id).turns == 1
    assert _status(database, office.manager.id) is None


def test_a_workers_session_finishes_when_its_task_completes(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    worker = _dispatch(office, "count the lamps")
    assert (worker.origin, worker.finished_at) == (SessionOrigin.SUBAGENT, None)
    clock.advance(7_000)
    office.model.push(Say("4"))
    assert office.runner.run(worker.id).turns == 1
    with database.unit_of_work() as uow:
        done = uow.ledger.sessions.get(worker.id)
    assert done is not None and done.task_status == "completed"
    assert done.started_at is not None and done.finished_at == clock()
