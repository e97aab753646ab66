"""A manager's workers over HTTP: GET …/workers with task status and paging; POST …/cancel
(waiting input dropped, a running turn aborted, the parent told, new messages refused)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from nexus.adapters.scripted import CallTools, Say, ScriptStep
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.engine.model import ModelRequest
from nexus.ledger.enums import TurnStatus
from nexus.ledger.records import NewSession, SessionRecord
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.signals import ABORT_POLL_MS
from nexus.settings import Settings
from tests.contract.agent_support import Office, ask, build_office, workers_of
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}


@dataclass
class Desk:
    office: Office
    client: TestClient
    coordination: InProcessCoordination


@pytest.fixture
def desk(database: Database, clock: FakeClock) -> Desk:
    coordination = InProcessCoordination()
    office = build_office(database, clock, coordination=coordination)
    graph = bootstrap(
        Settings(api_tokens="tok"),
        database=database,
        doorbell=office.doorbell,
        coordination=coordination,
    )
    return Desk(office, TestClient(create_app(graph)), coordination)


def _dispatch(office: Office, *tasks: str) -> list[SessionRecord]:
    calls = tuple(("agent_send", {"op": "dispatch", "text": task}) for task in tasks)
    office.model.push(CallTools(calls), Say("dispatched"))
    ask(office, office.manager.id, "split the work", f"api:{'/'.join(tasks)}")
    assert office.runner.run(office.manager.id).turns == 1
    return workers_of(office)


def test_the_workers_route_lists_a_managers_workers_with_their_task_status(desk: Desk) -> None:
    office, client = desk.office, desk.client
    first, second = _dispatch(office, "price the flights", "price the hotels")
    office.model.push(Say("320 EUR"))
    assert office.runner.run(first.id).turns == 1
    listed = client.get(f"/v1/sessions/{office.manager.label}/workers", headers=AUTH)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["next_cursor"] is None
    assert [
        (w["label"], w["task_description"], w["task_status"], w["turns"])
        for w in body["items"]
    ] == [
        (first.label, "price the flights", "completed", 1),
        (second.label, "price the hotels", "pending", 0),
    ]  # fmt: skip
    done = body["items"][0]
    assert done["last_turn_at"] is not None and done["created_at"] == first.created_at
    assert done["spawn_tool_call_id"] == first.spawn_tool_call_id
    assert body["items"][1]["last_turn_at"] is None
    # The dispatching turn's calls name the workers they spawned.
    turn = client.get(f"/v1/turns/{first.parent_turn_id}", headers=AUTH).json()
    assert [c["spawned_session_label"] for c in turn["tool_calls"]] == [first.label, second.label]
    # Paged like every list; a worker has no workers of its own.
    page = client.get(f"/v1/sessions/{office.manager.label}/workers?limit=1", headers=AUTH).json()
    assert [w["label"] for w in page["items"]] == [first.label]
    rest = client.get(
        f"/v1/sessions/{office.manager.label}/workers",
        params={"limit": 1, "cursor": page["next_cursor"]},
        headers=AUTH,
    ).json()
    assert [w["label"] for w in rest["items"]] == [second.label] and rest["next_cursor"] is None
    none = client.get(f"/v1/sessions/{first.label}/workers", headers=AUTH).json()
    assert none == {"items": [], "next_cursor": None}


def test_listing_workers_refuses_an_unknown_session_a_bad_cursor_and_no_token(
    desk: Desk,
) -> None:
    client = desk.client
    missing = client.get("/v1/sessions/nobody/workers", headers=AUTH)
    assert missing.status_code == 404 and "nobody" in missing.json()["error"]["message"]
    bad = client.get(f"/v1/sessions/{desk.office.manager.label}/workers?cursor=zz", headers=AUTH)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_cursor"
    for method, path in (("GET", "/v1/sessions/x/workers"), ("POST", "/v1/sessions/x/cancel")):
        assert client.request(method, path).status_code == 401


def test_cancelling_a_waiting_worker_drops_its_input_tells_the_parent_and_refuses_more(
    desk: Desk, database: Database
) -> None:
    office, client = desk.office, desk.client
    (worker,) = _dispatch(office, "count the chairs")
    cancelled = client.post(f"/v1/sessions/{worker.label}/cancel", headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    body = cancelled.json()
    assert body["worker"]["task_status"] == "cancelled" and body["worker"]["status"] == "archived"
    assert body["abort_requested"] is True and body["already_cancelled"] is False
    (task,) = body["cancelled_items"]
    assert desk.coordination.abort_epoch(worker.id) == worker.epoch
    queue = client.get(f"/v1/sessions/{worker.label}/queue", headers=AUTH).json()["items"]
    assert [(i["id"], i["status"], i["disposition"]) for i in queue] == [
        (task, "dropped", "cancelled")
    ]
    # Nothing is left to run, and a message for it is refused with the reason.
    assert office.runner.run(worker.id).turns == 0
    refused = client.post(
        f"/v1/sessions/{worker.label}/messages", json={"content": "and the tables?"}, headers=AUTH
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["message"] == (
        f"worker {worker.label!r} was cancelled: it takes no new work"
    )
    again = client.post(f"/v1/sessions/{worker.label}/cancel", headers=AUTH).json()
    assert again["already_cancelled"] is True and again["cancelled_items"] == []
    listed = client.get(f"/v1/sessions/{office.manager.label}/workers", headers=AUTH).json()
    assert [w["task_status"] for w in listed["items"]] == ["cancelled"]
    # The manager hears of it; its own message to the worker is refused as a tool error.
    office.model.push(
        CallTools((("send_message_to_agent", {"to": worker.label, "text": "go on"}),)),
        Say("the worker was stopped"),
    )
    assert office.runner.run(office.manager.id).turns == 1
    told = str(office.model.requests[-2].messages)
    assert f"[worker_result] {worker.label} was cancelled" in told
    (result,) = office.model.requests[-1].messages[-1]["content"]
    assert result["is_error"] is True and "was cancelled" in result["content"]
    with database.unit_of_work() as uow:
        assert uow.ledger.queue.for_session(worker.id)[0].id == task  # nothing new queued


def test_cancelling_a_running_worker_aborts_its_turn_and_its_answer_does_not_complete_it(
    desk: Desk, database: Database, clock: FakeClock
) -> None:
    office, client = desk.office, desk.client
    (worker,) = _dispatch(office, "count the chairs")
    answers: list[int] = []

    def cancelled_mid_turn(_request: ModelRequest) -> ScriptStep:
        answers.append(client.post(f"/v1/sessions/{worker.label}/cancel", headers=AUTH).status_code)
        clock.advance(ABORT_POLL_MS)  # the runner looks for an abort this often
        return Say("there are twelve chairs in the hall")

    office.model.push(cancelled_mid_turn)
    office.runner.run(worker.id)
    assert answers == [200]
    with database.unit_of_work() as uow:
        after = uow.ledger.sessions.get(worker.id)
        assert after is not None and after.thread_id is not None
        turn = uow.ledger.threads.get_turn(after.thread_id)
        parent_items = uow.ledger.queue.for_session(office.manager.id)
        texts = [uow.ledger.events.get(i.event_id or "") for i in parent_items]
    assert turn is not None and turn.turn.status == TurnStatus.ABORTED
    assert after.task_status == "cancelled"
    said = [e.text for e in texts if e is not None and e.adapter == "agent"]
    assert said == [f"[worker_result] {worker.label} was cancelled: stopped by an operator"]


def test_cancel_refuses_an_unknown_session_and_one_that_is_no_worker(desk: Desk) -> None:
    client = desk.client
    missing = client.post("/v1/sessions/nobody/cancel", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    manager = desk.office.manager.label
    refused = client.post(f"/v1/sessions/{manager}/cancel", headers=AUTH)
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "not_a_worker"
    assert "is not a worker" in refused.json()["error"]["message"]
    shown = client.get(f"/v1/sessions/{manager}", headers=AUTH).json()
    assert shown["status"] == "active" and shown["task_status"] is None  # nothing changed


def test_the_workers_route_lists_tasks_sent_to_other_sessions_beside_spawned_workers(
    desk: Desk, database: Database
) -> None:
    office, client = desk.office, desk.client
    with database.unit_of_work() as uow:
        alice = uow.ledger.sessions.create(
            NewSession(label="dm:ent_alice", persona_id=office.manager.persona_id)
        )
        uow.commit()
    office.model.push(
        CallTools(
            (
                ("agent_send", {"op": "dispatch", "text": "price the flights"}),
                (
                    "agent_send",
                    {"op": "dispatch", "text": "ask Alice", "target": {"session": alice.label}},
                ),
                ("agent_send", {"op": "dispatch", "text": "price the hotels"}),
            )
        ),
        Say("dispatched"),
    )
    ask(office, office.manager.id, "split the work", "api:split")
    assert office.runner.run(office.manager.id).turns == 1
    first, second = workers_of(office)
    office.model.push(Say("window seats"))
    assert office.runner.run(alice.id).turns == 1
    body = client.get(f"/v1/sessions/{office.manager.label}/workers", headers=AUTH).json()
    # One instant: the spawned workers first (in dispatch order), then the task.
    assert [
        (w["kind"], w["label"], w["task_description"], w["task_status"], w["turns"])
        for w in body["items"]
    ] == [
        ("worker", first.label, "price the flights", "pending", 0),
        ("worker", second.label, "price the hotels", "pending", 0),
        ("session", alice.label, "ask Alice", "completed", 1),
    ]  # fmt: skip
    task = body["items"][2]
    assert task["task_id"].startswith("agent-task:") and task["status"] == "active"
    assert task["parent_turn_id"] == first.parent_turn_id
    assert body["items"][0]["task_id"] is None
    # Paged one at a time, the cursor walks across both kinds without a gap or a repeat.
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 1}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get(
            f"/v1/sessions/{office.manager.label}/workers", params=params, headers=AUTH
        ).json()
        seen.extend(w["label"] for w in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [first.label, second.label, alice.label]
