"""agent_send's targets on the ledger: a fork or session target is checked before the tool
answers (a bad one is a tool error, and the turn commits), labelHint names the new session,
and a task sent to an existing session or a fork comes back as a worker_result."""

from __future__ import annotations

import json
from typing import Any

from nexus.adapters.scripted import CallTools, Fail, Say, ScriptStep
from nexus.agents.dispatched import dispatched_page
from nexus.db import Database
from nexus.engine.model import ModelError, ModelRequest
from nexus.ledger.enums import QueueStatus, SessionStatus, TurnStatus
from nexus.ledger.records import NewSession, SessionRecord
from tests.contract.agent_support import Office, ask, build_office, workers_of
from tests.support import FakeClock


def _results(request: ModelRequest) -> list[dict[str, Any]]:
    """The tool results the model was shown in `request`."""
    found: list[dict[str, Any]] = request.messages[-1]["content"]
    return found


def _ok(request: ModelRequest) -> dict[str, Any]:
    (result,) = _results(request)
    assert result["is_error"] is False, result
    decoded: dict[str, Any] = json.loads(result["content"])
    return decoded


def _session(database: Database, label: str) -> SessionRecord | None:
    with database.unit_of_work() as uow:
        return uow.ledger.sessions.resolve(label)


def _results_to(office: Office, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The agent events queued to a session: (text, payload), oldest first."""
    with office.database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session_id)
        events = [uow.ledger.events.get(item.event_id or "") for item in items]
        return [
            (event.text or "", uow.ledger.events.payload_of(event.id))
            for event in events
            if event is not None and event.adapter == "agent"
        ]


def _manager_turn(office: Office, step: CallTools, then: str = "done") -> ModelRequest:
    """The manager runs one turn that makes `step`'s calls; the request that saw their
    results. The turn commits and its input is consumed, never dead-lettered."""
    office.model.push(step, Say(then))
    ask(office, office.manager.id, "go", f"api:{len(office.model.requests)}")
    assert office.runner.run(office.manager.id).turns == 1
    _assert_committed_and_nothing_dead(office)
    return office.model.requests[-1]


def _assert_committed_and_nothing_dead(office: Office) -> None:
    with office.database.unit_of_work() as uow:
        manager = uow.ledger.sessions.get(office.manager.id)
        assert manager is not None and manager.thread_id is not None
        head = uow.ledger.threads.get_turn(manager.thread_id)
        items = uow.ledger.queue.for_session(office.manager.id)
    assert head is not None and head.turn.status == TurnStatus.COMPLETED
    assert QueueStatus.DEAD not in {item.status for item in items}
    assert all(i.status == QueueStatus.DONE for i in items if (i.event_id or "").startswith("api:"))


def _first_turn(office: Office) -> str:
    """The manager answers once; the id of that (forkable) turn."""
    office.model.push(Say("the plan: Lisbon in May"))
    ask(office, office.manager.id, "plan", "api:plan")
    assert office.runner.run(office.manager.id).turns == 1
    with office.database.unit_of_work() as uow:
        manager = uow.ledger.sessions.get(office.manager.id)
    assert manager is not None and manager.thread_id is not None
    return manager.thread_id


def _other(office: Office, label: str) -> SessionRecord:
    with office.database.unit_of_work() as uow:
        session = uow.ledger.sessions.create(
            NewSession(label=label, persona_id=office.manager.persona_id)
        )
        uow.commit()
    return session


# -- fork ----------------------------------------------------------------------------------


def test_a_fork_of_an_unknown_or_unforkable_turn_is_a_tool_error_and_the_turn_commits(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    # A failed attempt is recorded, but on no chain: it cannot be forked either.
    office.model.push(Fail(ModelError("model_error", "overloaded", retryable=True)))
    ask(office, office.manager.id, "first try", "api:first")
    office.runner.run(office.manager.id)
    with database.unit_of_work() as uow:
        failed = uow.connection.exec_driver_sql(
            "SELECT id FROM turns WHERE status = 'failed'"
        ).scalar_one()
    clock.advance(60_000)

    def fork(turn: str) -> tuple[str, dict[str, Any]]:
        return ("agent_send", {"op": "dispatch", "text": "x", "target": {"fork": turn}})

    office.model.push(CallTools((fork("nope"), fork(failed), fork(""))), Say("could not fork"))
    assert office.runner.run(office.manager.id).turns == 1
    _assert_committed_and_nothing_dead(office)
    seen = office.model.requests[-1]
    first, failed_one, second = _results(seen)
    assert failed_one["is_error"] is True and "cannot be forked" in failed_one["content"]
    assert first["is_error"] is True and "cannot be forked" in first["content"]
    assert second["is_error"] is True and "must name a turn" in second["content"]
    with database.unit_of_work() as uow:
        count = uow.connection.exec_driver_sql("SELECT count(*) FROM sessions").scalar_one()
    assert count == 1  # the manager alone: no fork was made
    assert _results_to(office, office.manager.id) == []


def test_a_fork_with_a_label_hint_is_named_by_it_and_its_answer_comes_back(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    turn = _first_turn(office)
    target = {"fork": turn, "labelHint": "Try Porto / instead!"}
    seen = _manager_turn(
        office,
        CallTools(
            (
                ("agent_send", {"op": "dispatch", "text": "what about Porto?", "target": target}),
                ("agent_send", {"op": "dispatch", "text": "and Faro?", "target": target}),
            )
        ),
    )
    first, second = (json.loads(r["content"]) for r in _results(seen))
    assert (first["forked"], second["forked"]) == (
        "fork-Try-Porto-instead",
        "fork-Try-Porto-instead-2",
    )
    fork = _session(database, "fork-Try-Porto-instead")
    assert fork is not None and fork.thread_id == turn and fork.origin.value == "fork"
    office.model.push(Say("Porto: cheaper, rainier"))
    assert office.runner.run(fork.id).turns == 1
    # The fork saw the history it branched from, and its answer went to the manager.
    assert "the plan: Lisbon in May" in str(office.model.requests[-1].messages)
    ((text, payload),) = _results_to(office, office.manager.id)
    assert text == "[worker_result] fork-Try-Porto-instead reports: Porto: cheaper, rainier"
    assert (payload["task"], payload["task_status"]) == (first["task"], "completed")
    with database.unit_of_work() as uow:
        listed = dispatched_page(uow.ledger, office.manager.label, after=None, limit=10)
    assert [(d.kind, d.session.label, d.task_status) for d in listed] == [
        ("fork", "fork-Try-Porto-instead", "completed"),
        ("fork", "fork-Try-Porto-instead-2", "pending"),
    ]


def test_a_fork_whose_label_is_taken_before_the_commit_is_undone_and_the_caller_told(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    turn = _first_turn(office)

    def someone_takes_the_label(_request: ModelRequest) -> ScriptStep:
        _other(office, "fork-porto")  # committed between the tool call and the turn's commit
        return Say("forked")

    office.model.push(
        CallTools(
            (
                (
                    "agent_send",
                    {
                        "op": "dispatch",
                        "text": "porto?",
                        "target": {"fork": turn, "labelHint": "porto"},
                    },
                ),
            )
        ),
        someone_takes_the_label,
        Say("I will try again"),
    )
    ask(office, office.manager.id, "fork it", "api:fork")
    # The turn commits, and the notice it left is the manager's next turn.
    assert office.runner.run(office.manager.id).turns == 2
    assert "fork-porto failed: the dispatch did not happen" in str(
        office.model.requests[-1].messages
    )
    _assert_committed_and_nothing_dead(office)
    taken = _session(database, "fork-porto")
    assert taken is not None and taken.thread_id is None  # the other one, not a fork
    ((text, payload),) = _results_to(office, office.manager.id)
    assert text.startswith("[worker_result] fork-porto failed: the dispatch did not happen")
    assert payload["failed"] is True
    with database.unit_of_work() as uow:
        assert dispatched_page(uow.ledger, office.manager.label, after=None, limit=10) == []


# -- new session ---------------------------------------------------------------------------


def test_a_new_worker_takes_its_label_hint_made_safe_and_unique(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    _other(office, "worker:flights")

    def dispatch(target: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return ("agent_send", {"op": "dispatch", "text": "price the flights", "target": target})

    seen = _manager_turn(
        office,
        CallTools(
            (
                dispatch({"new_session": {"labelHint": "flights"}}),
                dispatch({"new_session": True, "labelHint": "worker:flights"}),
                dispatch({"new_session": {"labelHint": "dm:ent_alice"}}),
                dispatch({"new_session": {"labelHint": "///"}}),
            )
        ),
    )
    labels = [json.loads(r["content"])["dispatched"] for r in _results(seen)]
    assert labels[:3] == ["worker:flights-2", "worker:flights-3", "worker:dm:ent_alice"]
    assert labels[3].startswith("worker:") and len(labels[3]) == len("worker:") + 26
    workers = {w.label: w for w in workers_of(office)}
    assert set(workers) == set(labels)
    assert all(w.parent_session_label == office.manager.label for w in workers.values())
    assert _session(database, "dm:ent_alice") is None  # a hint never takes a platform's key


def test_a_bad_target_shape_is_a_tool_error(database: Database, clock: FakeClock) -> None:
    office = build_office(database, clock)
    seen = _manager_turn(
        office,
        CallTools(
            (
                (
                    "agent_send",
                    {"op": "dispatch", "text": "x", "target": {"fork": "a", "session": "b"}},
                ),
                ("agent_send", {"op": "dispatch", "text": "x", "target": {"labelHint": 3}}),
                ("agent_send", {"op": "message", "text": "x"}),
            )
        ),
    )
    assert [r["is_error"] for r in _results(seen)] == [True, True, True]
    assert workers_of(office) == []


# -- session -------------------------------------------------------------------------------


def test_a_session_target_must_exist_be_active_and_not_be_the_caller(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    archived = _other(office, "dm:ent_gone")
    with database.unit_of_work() as uow:
        uow.ledger.sessions.configure(archived.id, {"status": SessionStatus.ARCHIVED})
        uow.commit()

    def to(label: str) -> tuple[str, dict[str, Any]]:
        return ("agent_send", {"op": "dispatch", "text": "help", "target": {"session": label}})

    seen = _manager_turn(
        office, CallTools((to("nobody"), to("dm:ent_gone"), to(office.manager.label)))
    )
    errors = [(r["is_error"], r["content"]) for r in _results(seen)]
    assert errors == [
        (True, "no session 'nobody'"),
        (True, "session 'dm:ent_gone' is archived: it takes no new messages"),
        (True, f"session {office.manager.label!r} is this session: send to another"),
    ]
    with database.unit_of_work() as uow:
        assert uow.ledger.queue.for_session(archived.id) == []
        assert dispatched_page(uow.ledger, office.manager.label, after=None, limit=10) == []


def test_a_task_to_an_existing_session_is_tracked_and_its_answer_comes_back(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    alice = _other(office, "dm:ent_alice")
    seen = _manager_turn(
        office,
        CallTools(
            (
                (
                    "agent_send",
                    {
                        "op": "dispatch",
                        "text": "what does Alice prefer?",
                        "target": {"session": alice.label},
                    },
                ),
            )
        ),
    )
    sent = _ok(seen)
    assert sent["dispatched"] == alice.label and sent["task"].startswith("agent-task:")
    with database.unit_of_work() as uow:
        (entry,) = dispatched_page(uow.ledger, office.manager.label, after=None, limit=10)
        manager = uow.ledger.sessions.get(office.manager.id)
        assert manager is not None and manager.thread_id is not None
        dispatching = uow.ledger.threads.get_turn(manager.thread_id)
    assert dispatching is not None
    assert (entry.kind, entry.session.label, entry.task_id) == (
        "session",
        alice.label,
        sent["task"],
    )
    assert (entry.task_description, entry.task_status) == ("what does Alice prefer?", "pending")
    assert entry.parent_turn_id == dispatching.turn.id
    assert entry.spawn_tool_call_id == dispatching.tool_calls[0].id
    # The session stays what it was: no worker, no parent of its own.
    after = _session(database, alice.label)
    assert after is not None and not after.is_subagent and after.parent_session_label is None
    # While its run has the task, the task is running; its answer completes it.
    office.model.push(
        CallTools((("get_agent_status", {"session": office.manager.label}),)), Say("window seats")
    )
    assert office.runner.run(alice.id).turns == 1
    (shown,) = _ok(office.model.requests[-1])["workers"]
    assert shown == {
        "session": alice.label,
        "task": "what does Alice prefer?",
        "task_status": "running",
        "kind": "session",
        "task_id": sent["task"],
    }
    ((text, payload),) = _results_to(office, office.manager.id)
    assert text == f"[worker_result] {alice.label} reports: window seats"
    assert (payload["task"], payload["task_status"], payload["failed"]) == (
        sent["task"],
        "completed",
        False,
    )
    with database.unit_of_work() as uow:
        (entry,) = dispatched_page(uow.ledger, office.manager.label, after=None, limit=10)
    assert entry.task_status == "completed"
    # A later turn of that session owes the manager nothing.
    office.model.push(Say("hello Alice"))
    ask(office, alice.id, "hi", "api:alice-hi")
    assert office.runner.run(alice.id).turns == 1
    assert len(_results_to(office, office.manager.id)) == 1


def test_a_task_to_a_session_archived_before_the_commit_is_undone_and_the_caller_told(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    alice = _other(office, "dm:ent_alice")

    def archived_meanwhile(_request: ModelRequest) -> ScriptStep:
        with database.unit_of_work() as uow:
            uow.ledger.sessions.configure(alice.id, {"status": SessionStatus.ARCHIVED})
            uow.commit()
        return Say("asked Alice")

    office.model.push(
        CallTools(
            (
                (
                    "agent_send",
                    {"op": "dispatch", "text": "help", "target": {"session": alice.label}},
                ),
            )
        ),
        archived_meanwhile,
        Say("Alice is gone"),
    )
    ask(office, office.manager.id, "ask alice", "api:alice")
    assert office.runner.run(office.manager.id).turns == 2  # the turn, then the notice
    _assert_committed_and_nothing_dead(office)
    ((text, payload),) = _results_to(office, office.manager.id)
    assert text == (
        f"[worker_result] {alice.label} failed: the dispatch did not happen: "
        f"session {alice.label!r} was archived meanwhile"
    )
    assert payload["failed"] is True
    with database.unit_of_work() as uow:
        assert uow.ledger.queue.for_session(alice.id) == []
        assert dispatched_page(uow.ledger, office.manager.label, after=None, limit=10) == []


def test_a_task_to_a_managers_own_worker_is_answered_once(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    _manager_turn(office, CallTools((("agent_send", {"op": "dispatch", "text": "count"}),)))
    (worker,) = workers_of(office)
    office.model.push(Say("12 chairs"))
    assert office.runner.run(worker.id).turns == 1
    office.model.push(Say("noted"))
    assert office.runner.run(office.manager.id).turns == 1
    _manager_turn(
        office,
        CallTools(
            (
                (
                    "agent_send",
                    {"op": "dispatch", "text": "and tables?", "target": {"session": worker.label}},
                ),
            )
        ),
    )
    office.model.push(Say("3 tables"))
    assert office.runner.run(worker.id).turns == 1
    told = [text for text, _ in _results_to(office, office.manager.id)]
    assert told == [
        f"[worker_result] {worker.label} reports: 12 chairs",
        f"[worker_result] {worker.label} reports: 3 tables",
    ]
    with database.unit_of_work() as uow:
        listed = dispatched_page(uow.ledger, office.manager.label, after=None, limit=10)
    assert [(d.kind, d.task_status) for d in listed] == [
        ("worker", "completed"),
        ("session", "completed"),
    ]


def test_a_task_whose_message_is_dead_lettered_fails_and_its_caller_is_told(
    database: Database, clock: FakeClock
) -> None:
    office = build_office(database, clock)
    alice = _other(office, "dm:ent_alice")
    sent = _ok(
        _manager_turn(
            office,
            CallTools(
                (
                    (
                        "agent_send",
                        {"op": "dispatch", "text": "help", "target": {"session": alice.label}},
                    ),
                )
            ),
        )
    )
    down = ModelError("model_error", "overloaded", retryable=True)
    office.model.push(Fail(down), Fail(down), Fail(down))
    for _ in range(3):
        office.runner.run(alice.id)
        clock.advance(60_000)
    ((text, payload),) = _results_to(office, office.manager.id)
    assert text.startswith(f"[worker_result] {alice.label} failed: model_error: overloaded")
    assert (payload["task"], payload["task_status"]) == (sent["task"], "failed")
    with database.unit_of_work() as uow:
        (entry,) = dispatched_page(uow.ledger, office.manager.label, after=None, limit=10)
    assert entry.task_status == "failed"
