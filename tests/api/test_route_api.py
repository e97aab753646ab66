"""POST /v1/route: thread, session and persona targets, smart routing, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.scripted import Say
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}
UNKNOWN = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def _client(rig: Rig) -> TestClient:
    settings = Settings(api_tokens="tok")
    return TestClient(
        create_app(bootstrap(settings, database=rig.database, doorbell=RecordingDoorbell()))
    )


def _route(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/route", json={"content": "hello", **body}, headers=AUTH)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_a_session_label_or_alias_resolves_without_enqueuing(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_a")
    head = rig.say(session.id, "hi").turn_id
    with database.unit_of_work() as uow:
        uow.ledger.sessions.add_alias("dm:ent_old", "dm:ent_a", reason="merge")
        uow.commit()
    client = _client(rig)
    expected = {
        "session": "dm:ent_a",
        "session_id": session.id,
        "persona_id": session.persona_id,
        "thread_id": head,
        "how": "label",
        "score": None,
        "created": False,
        "smart_changed": False,
    }
    assert _route(client, session="dm:ent_a") == expected
    assert _route(client, session="dm:ent_old") == {**expected, "how": "alias"}
    with database.unit_of_work() as uow:
        assert uow.ledger.queue.for_session(session.id) == []


def test_a_thread_at_a_head_continues_and_an_older_one_forks(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_t")
    first = rig.say(session.id, "one").turn_id
    head = rig.say(session.id, "two").turn_id
    client = _client(rig)
    at_head = _route(client, thread=head)
    assert (at_head["session"], at_head["how"], at_head["created"]) == ("dm:ent_t", "head", False)
    forked = _route(client, thread=first)
    assert (forked["how"], forked["thread_id"], forked["created"]) == ("fork", first, True)
    with database.unit_of_work() as uow:
        stored = uow.ledger.sessions.resolve(forked["session"])
    assert stored is not None and stored.thread_id == first and stored.origin == "fork"
    # That fork now heads the turn, so routing there again continues it.
    assert _route(client, thread=first)["session"] == forked["session"]


def test_a_persona_goes_to_its_main_session(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    rig.session("dm:ent_p", persona="assistant")
    client = _client(rig)
    created = _route(client, persona="assistant")
    assert created["session"] == "system:persona:assistant"
    assert (created["how"], created["created"], created["thread_id"]) == ("created", True, None)
    again = _route(client, persona="assistant")
    assert (again["how"], again["created"], again["session_id"]) == (
        "persona",
        False,
        created["session_id"],
    )


def test_smart_routing_says_when_it_changed_the_target(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    billing = rig.session("dm:ent_billing")
    weather = rig.session("dm:ent_weather")
    rig.model.push(Say("I sent the invoice for ACME Corp yesterday."))
    rig.say(billing.id, "did the ACME invoice go out?")
    rig.model.push(Say("Sunny with light wind."))
    rig.say(weather.id, "what's the forecast for tomorrow?")
    client = _client(rig)
    smart = _route(client, session=weather.label, smart=True, content="the invoice for ACME")
    assert (smart["session"], smart["how"], smart["smart_changed"]) == (
        "dm:ent_billing",
        "smart",
        True,
    )
    assert isinstance(smart["score"], float) and smart["score"] > 0
    fallback = _route(client, session=weather.label, smart=True, content="quantum chromodynamics")
    assert (fallback["session"], fallback["how"], fallback["smart_changed"]) == (
        "dm:ent_weather",
        "label",
        False,
    )
    same = _route(client, session=billing.label, smart=True, content="the ACME invoice")
    assert (same["how"], same["smart_changed"]) == ("smart", False)


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ({"content": "x"}, "exactly one"),
        ({"session": "a", "persona": "b", "content": "x"}, "exactly one"),
        ({"session": "a"}, "content"),
        ({"session": "a", "content": ""}, "content"),
        ({"session": "a\nb", "content": "x"}, "control"),
        ({"session": "a", "content": "x", "mode": "steer"}, "mode"),
        ({"session": "a", "content": "x", "smart": "maybe"}, "smart"),
    ],
    ids=["none", "two", "no-content", "empty-content", "bad-label", "extra", "bad-smart"],
)
def test_a_bad_body_is_422_with_a_message(
    database: Database, clock: FakeClock, body: dict[str, Any], word: str
) -> None:
    response = _client(build_rig(database, clock)).post("/v1/route", json=body, headers=AUTH)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request" and word in error["message"]


def test_unknown_targets_are_404(database: Database, clock: FakeClock) -> None:
    client = _client(build_rig(database, clock))
    for body, word in (
        ({"session": "dm:nobody"}, "dm:nobody"),
        ({"persona": "ghost"}, "ghost"),
        ({"thread": UNKNOWN}, UNKNOWN),
    ):
        response = client.post("/v1/route", json={"content": "x", **body}, headers=AUTH)
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["type"] == "not_found" and word in error["message"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}], ids=["missing", "wrong"]
)
def test_the_route_needs_the_token(
    database: Database, clock: FakeClock, headers: dict[str, str]
) -> None:
    rig = build_rig(database, clock)
    rig.session("dm:ent_a", persona="assistant")
    response = _client(rig).post(
        "/v1/route", json={"persona": "assistant", "content": "x"}, headers=headers
    )
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["type"] == "unauthorized" and error["message"]
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("system:persona:assistant") is None
