"""A session's title and tags, its start and finish, its origin and the event it came from,
deleting it (a status that frees its label) and rolling its head back."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import IntegrityError

from nexus.api.app import create_app
from nexus.arrival.route import RouteTarget, persona_session_label, route
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import Disposition, SessionOrigin
from nexus.ledger.records import NewSession
from nexus.queueing.coordination import InProcessCoordination
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}


def _client(database: Database, coordination: InProcessCoordination | None = None) -> TestClient:
    graph = bootstrap(
        Settings(api_tokens="tok"),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=coordination or InProcessCoordination(),
    )
    return TestClient(create_app(graph))


def _texts(rig: Rig) -> list[str]:
    """The user texts the model was sent in its latest request, oldest first (without the
    event notes the engine adds)."""
    found = []
    for message in rig.model.requests[-1].messages:
        for block in message["content"]:
            text = block.get("text", "") if block.get("type") == "text" else ""
            if message["role"] == "user" and text and not text.startswith("[event]"):
                found.append(text)
    return found


# -- title, tags, origin, source event, start and finish -----------------------------------------


def test_title_and_tags_are_set_by_patch_and_shown_in_get_and_the_list(database: Database) -> None:
    client = _client(database)
    assert client.post("/v1/sessions", json={"label": "notes"}, headers=AUTH).status_code == 201
    changed = client.patch(
        "/v1/sessions/notes",
        json={"title": "Tax notes", "tags": ["tax", "2026", "tax"]},
        headers=AUTH,
    )
    assert changed.status_code == 200, changed.text
    assert (changed.json()["title"], changed.json()["tags"]) == ("Tax notes", ["tax", "2026"])
    shown = client.get("/v1/sessions/notes", headers=AUTH).json()
    assert (shown["title"], shown["tags"]) == ("Tax notes", ["tax", "2026"])
    [listed] = client.get("/v1/sessions", headers=AUTH).json()["items"]
    assert (listed["title"], listed["tags"]) == ("Tax notes", ["tax", "2026"])
    # A tag is one word; a refused body changes nothing.
    refused = client.patch("/v1/sessions/notes", json={"tags": ["two words"]}, headers=AUTH)
    assert refused.status_code == 422, refused.text
    assert client.get("/v1/sessions/notes", headers=AUTH).json()["tags"] == ["tax", "2026"]
    cleared = client.patch("/v1/sessions/notes", json={"title": None, "tags": None}, headers=AUTH)
    assert (cleared.json()["title"], cleared.json()["tags"]) == (None, None)


def test_a_message_that_creates_a_session_records_its_event_and_key(database: Database) -> None:
    client = _client(database)
    sent = client.post("/v1/sessions/fresh/messages", json={"content": "hi"}, headers=AUTH)
    assert sent.status_code == 202, sent.text
    shown = client.get("/v1/sessions/fresh", headers=AUTH).json()
    assert shown["origin"] == SessionOrigin.USER
    assert (shown["routing_key"], shown["source_event_id"]) == ("fresh", sent.json()["event_id"])
    made = client.post("/v1/sessions", json={"label": "made"}, headers=AUTH).json()
    assert (made["origin"], made["source_event_id"]) == (SessionOrigin.USER, None)


def test_a_personas_main_session_is_nexus_own(database: Database) -> None:
    """Nexus makes a persona's main session itself: origin system, from the event that
    asked for it, keyed by its label."""
    with database.unit_of_work() as uow:
        uow.ledger.agents.ensure("scout")
        routed = route(uow.ledger, RouteTarget("persona", "scout"), source_event_id="ev-1")
        uow.commit()
    session = routed.session
    assert (session.origin, session.source_event_id) == (SessionOrigin.SYSTEM, "ev-1")
    assert session.routing_key == persona_session_label("scout")


def test_a_hook_creates_its_target_session_as_nexus_own(database: Database) -> None:
    from nexus.hooks.service import _target_session
    from nexus.hooks.spec import Routing

    with database.unit_of_work() as uow:
        session = _target_session(uow, Routing(kind="session", target="digest"), "hook:ev-2")
        uow.commit()
    assert (session.origin, session.routing_key) == (SessionOrigin.SYSTEM, "digest")
    assert session.source_event_id == "hook:ev-2"


def test_started_at_is_the_first_turns_start_and_deleting_finishes_it(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_times")
    assert session.started_at is None
    first = rig.say(session.id, "one")
    clock.advance(5_000)
    rig.say(session.id, "two")
    with database.unit_of_work() as uow:
        started = uow.ledger.sessions.get(session.id)
        first_turn = uow.ledger.threads.get_turn(first.turn_id)
    assert started is not None and first_turn is not None
    assert started.started_at == first_turn.turn.started_at and started.finished_at is None
    client = _client(database)
    clock.advance(1_000)
    deleted = client.delete("/v1/sessions/dm:ent_times", headers=AUTH).json()
    assert deleted["finished_at"] == clock() and deleted["started_at"] == started.started_at


# -- delete -------------------------------------------------------------------------------------


def test_delete_is_a_status_that_refuses_work_drops_the_queue_and_frees_the_label(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_gone")
    said = rig.say(session.id, "remember the blue door")
    client = _client(database)
    waiting = client.post(
        "/v1/sessions/dm:ent_gone/messages", json={"content": "still there?"}, headers=AUTH
    ).json()

    gone = client.delete("/v1/sessions/dm:ent_gone", headers=AUTH)
    assert gone.status_code == 200, gone.text
    assert gone.json()["status"] == "deleted" and gone.json()["id"] == session.id
    # GET says so; the history stays readable.
    assert client.get("/v1/sessions/dm:ent_gone", headers=AUTH).json()["status"] == "deleted"
    turns = client.get("/v1/sessions/dm:ent_gone/turns", headers=AUTH).json()["turns"]
    assert [t["turn"]["id"] for t in turns] == [said.turn_id]
    # What waited got its disposition.
    queue = client.get("/v1/sessions/dm:ent_gone/queue", headers=AUTH).json()["items"]
    [item] = [i for i in queue if i["id"] == waiting["queue_item_id"]]
    assert (item["status"], item["disposition"], item["detail"]) == (
        "dropped",
        Disposition.CANCELLED,
        "session deleted",
    )
    # New work is refused, naming why.
    refused = client.post(
        "/v1/sessions/dm:ent_gone/messages", json={"content": "hello?"}, headers=AUTH
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "session_deleted"
    assert "was deleted" in refused.json()["error"]["message"]
    assert (
        client.patch("/v1/sessions/dm:ent_gone", json={"title": "x"}, headers=AUTH).status_code
        == 409
    )
    # Deleting again changes nothing.
    assert client.delete("/v1/sessions/dm:ent_gone", headers=AUTH).json()["status"] == "deleted"

    # The label is free: a new session takes it, and the old one's rows stay.
    again = client.post("/v1/sessions", json={"label": "dm:ent_gone"}, headers=AUTH)
    assert again.status_code == 201, again.text
    assert again.json()["id"] != session.id and again.json()["status"] == "active"
    assert client.get("/v1/sessions/dm:ent_gone", headers=AUTH).json()["id"] == again.json()["id"]
    assert client.get(f"/v1/turns/{said.turn_id}", headers=AUTH).status_code == 200
    # Only one live session may hold a label.
    taken = client.post("/v1/sessions", json={"label": "dm:ent_gone"}, headers=AUTH)
    assert taken.status_code == 409


def test_the_ledger_allows_one_live_session_per_label(database: Database) -> None:
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        first = uow.ledger.sessions.create(NewSession(label="twice", persona_id=persona.id))
        uow.ledger.sessions.configure(first.id, {"status": "deleted"})
        second = uow.ledger.sessions.create(NewSession(label="twice", persona_id=persona.id))
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("twice") == uow.ledger.sessions.get(second.id)
        # Straight to the table, past the repository's check: the index refuses it.
        mark = "?" if database.engine.dialect.name == "sqlite" else "%s"
        insert = (
            "INSERT INTO sessions (id, label, persona_id, epoch, origin, status, is_subagent, "
            f"created_at, updated_at) VALUES ('X', 'twice', {mark}, 0, 'user', 'active', "
            "false, 0, 0)"
        )
        with pytest.raises(IntegrityError, match=r"(?i)unique"):
            uow.connection.exec_driver_sql(insert, (persona.id,))


# -- rollback -----------------------------------------------------------------------------------


def _three(rig: Rig, label: str = "dm:ent_back") -> tuple[str, list[str]]:
    session = rig.session(label)
    turns = [rig.say(session.id, text).turn_id for text in ("one", "two", "three")]
    return session.id, turns


def test_rollback_moves_the_head_and_the_next_turn_sees_only_the_kept_history(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session_id, turns = _three(rig)
    client = _client(database)
    done = client.post(
        "/v1/sessions/dm:ent_back/rollback", json={"turn_id": turns[0]}, headers=AUTH
    )
    assert done.status_code == 200, done.text
    assert done.json() == {
        "session": "dm:ent_back",
        "head": turns[0],
        "previous_head": turns[2],
        "moved": True,
    }
    rig.say(session_id, "four")
    assert _texts(rig) == ["one", "four"]
    # Recorded in the pointer history, the epoch moved on (fenced like a commit).
    with database.unit_of_work() as uow:
        moves = uow.ledger.sessions.history(session_id)
    rollback = [move for move in moves if move[3] == "rollback"]
    assert [(m[0], m[1]) for m in rollback] == [(turns[2], turns[0])]
    # Nothing deleted: the abandoned turns stay readable, and the tree shows the branch.
    assert client.get(f"/v1/turns/{turns[2]}", headers=AUTH).status_code == 200
    tree = client.get("/v1/sessions/dm:ent_back/tree", headers=AUTH).json()
    assert [t["query"] for t in tree["turns"]] == ["one", "four"]
    assert tree["turns"][0]["branches"] == [
        {"kind": "abandoned", "session": "dm:ent_back", "task": None, "head": turns[2]}
    ]


def test_a_stale_run_cannot_commit_after_a_rollback(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session_id, turns = _three(rig)
    with database.unit_of_work() as uow:
        stale_epoch = uow.ledger.sessions.get(session_id).epoch  # type: ignore[union-attr]
    client = _client(database)
    assert (
        client.post(
            "/v1/sessions/dm:ent_back/rollback", json={"turn_id": turns[1]}, headers=AUTH
        ).status_code
        == 200
    )
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.get(session_id).epoch == stale_epoch + 1  # type: ignore[union-attr]
        moved = uow.ledger.sessions.move_head(
            session_id, turns[2], epoch=stale_epoch, expected=turns[1], reason="rollback"
        )
    assert not moved


def test_rollback_is_idempotent_at_the_head(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    _, turns = _three(rig)
    client = _client(database)
    same = client.post(
        "/v1/sessions/dm:ent_back/rollback", json={"turn_id": turns[2]}, headers=AUTH
    )
    assert same.status_code == 200 and same.json()["moved"] is False


def _refused(client: TestClient, label: str, body: dict[str, Any]) -> tuple[int, str, str]:
    answer = client.post(f"/v1/sessions/{label}/rollback", json=body, headers=AUTH)
    error = answer.json()["error"]
    return answer.status_code, error["type"], error["message"]


def test_rollback_refuses_turns_off_the_chain_unknown_turns_and_deleted_sessions(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    _, turns = _three(rig)
    _, others = _three(rig, "dm:ent_other")
    client = _client(database)
    status, kind, message = _refused(client, "dm:ent_back", {"turn_id": "01NOSUCHTURN"})
    assert (status, kind) == (404, "not_found") and "no turn" in message
    status, kind, message = _refused(client, "dm:ent_back", {"turn_id": others[0]})
    assert (status, kind) == (409, "not_in_chain") and "another session" in message
    # After going back, the abandoned head is off the chain: no rolling "forward".
    client.post("/v1/sessions/dm:ent_back/rollback", json={"turn_id": turns[0]}, headers=AUTH)
    status, kind, message = _refused(client, "dm:ent_back", {"turn_id": turns[2]})
    assert (status, kind) == (409, "not_in_chain") and "abandoned branch" in message
    client.delete("/v1/sessions/dm:ent_other", headers=AUTH)
    status, kind, message = _refused(client, "dm:ent_other", {"turn_id": others[0]})
    assert (status, kind) == (409, "session_deleted") and "deleted" in message


def test_rollback_while_a_turn_runs_is_refused_and_abort_asks_it_to_stop(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session_id, turns = _three(rig)
    coordination = InProcessCoordination()
    client = _client(database, coordination)
    lease = coordination.acquire(f"session:{session_id}", 30_000)  # a run holds the session
    assert lease is not None
    status, kind, message = _refused(client, "dm:ent_back", {"turn_id": turns[0]})
    assert (status, kind) == (409, "turn_running") and "abort" in message
    assert coordination.abort_epoch(session_id) is None
    status, kind, message = _refused(client, "dm:ent_back", {"turn_id": turns[0], "abort": True})
    assert (status, kind) == (409, "turn_running") and "asked to stop" in message
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(session_id)
    assert session is not None and session.thread_id == turns[2]  # nothing moved
    assert coordination.abort_epoch(session_id) == session.epoch
    lease.release()  # the run ended
    done = client.post(
        "/v1/sessions/dm:ent_back/rollback", json={"turn_id": turns[0], "abort": True}, headers=AUTH
    )
    assert done.status_code == 200 and done.json()["head"] == turns[0]


def test_an_alias_of_a_deleted_session_starts_a_new_one_under_the_label_it_leads_to(
    database: Database,
) -> None:
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        primary = uow.ledger.sessions.create(NewSession(label="primary", persona_id=persona.id))
        uow.ledger.sessions.add_alias("old-key", "primary", reason="merge")
        uow.ledger.sessions.configure(primary.id, {"status": "deleted"})
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("old-key") is None
        fresh = uow.ledger.sessions.ensure(NewSession(label="old-key", persona_id=persona.id))
        uow.commit()
    assert fresh.label == "primary" and fresh.id != primary.id
