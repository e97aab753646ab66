"""POST /v1/route: thread, session and persona targets, routing by content, what it queues
and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.adapters.scripted import Say
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}
UNKNOWN = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def _client(rig: Rig, doorbell: RecordingDoorbell | None = None) -> TestClient:
    settings = Settings(api_tokens="tok")
    bell = doorbell or RecordingDoorbell()
    return TestClient(create_app(bootstrap(settings, database=rig.database, doorbell=bell)))


def _route(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/route", json={"content": "hello", **body}, headers=AUTH)
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _queued_texts(database: Database, session_id: str) -> list[str | None]:
    """What waits in the session's queue, as the text of each item's event."""
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session_id)
        events = [uow.ledger.events.get(item.event_id or "") for item in items]
    return [event.text if event is not None else None for event in events]


def test_a_session_label_or_alias_gets_the_content_queued(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_a")
    head = rig.say(session.id, "hi").turn_id
    with database.unit_of_work() as uow:
        uow.ledger.sessions.add_alias("dm:ent_old", "dm:ent_a", reason="merge")
        uow.commit()
    doorbell = RecordingDoorbell()
    client = _client(rig, doorbell)
    routed = _route(client, session="dm:ent_a", content="first")
    assert {k: routed[k] for k in ("session", "session_id", "thread_id", "how", "created")} == {
        "session": "dm:ent_a",
        "session_id": session.id,
        "thread_id": head,
        "how": "label",
        "created": False,
    }
    assert (routed["score"], routed["matched_terms"], routed["smart_changed"]) == (None, [], False)
    assert routed["mode"] == "interrupt"  # a person's message, as POST …/messages queues it
    aliased = _route(client, session="dm:ent_old", content="second")
    assert (aliased["session"], aliased["how"]) == ("dm:ent_a", "alias")
    assert _queued_texts(database, session.id) == ["first", "second"]
    with database.unit_of_work() as uow:
        item = uow.ledger.queue.get(routed["queue_item_id"])
    assert item is not None and item.event_id == routed["event_id"]
    assert doorbell.sessions == [session.id, session.id]  # rung after each commit


def test_a_thread_at_a_head_continues_and_an_older_one_forks_with_the_content(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_t")
    first = rig.say(session.id, "one").turn_id
    head = rig.say(session.id, "two").turn_id
    client = _client(rig)
    at_head = _route(client, thread=head, content="three")
    assert (at_head["session"], at_head["how"], at_head["created"]) == ("dm:ent_t", "head", False)
    assert _queued_texts(database, session.id) == ["three"]
    forked = _route(client, thread=first, content="what if instead")
    assert (forked["how"], forked["thread_id"], forked["created"]) == ("fork", first, True)
    with database.unit_of_work() as uow:
        stored = uow.ledger.sessions.resolve(forked["session"])
    assert stored is not None and stored.thread_id == first and stored.origin == "fork"
    # Not an empty fork: the content waits there, and its turn will be a child of `first`.
    assert _queued_texts(database, stored.id) == ["what if instead"]
    # That fork now heads the turn, so routing there again continues it.
    again = _route(client, thread=first, content="and then?")
    assert again["session"] == forked["session"] and again["how"] == "head"
    assert _queued_texts(database, stored.id) == ["what if instead", "and then?"]


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
    assert _queued_texts(database, created["session_id"]) == ["hello", "hello"]


def test_content_is_routed_to_the_session_that_discussed_it_with_the_reason(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    billing = rig.session("dm:ent_billing")
    weather = rig.session("dm:ent_weather")
    rig.model.push(Say("I sent the invoice for ACME Corp yesterday."))
    discussed = rig.say(billing.id, "did the ACME invoice go out?").turn_id
    rig.model.push(Say("Sunny with light wind."))
    rig.say(weather.id, "what's the forecast for tomorrow?")
    client = _client(rig)
    smart = _route(client, session=weather.label, smart=True, content="the invoice for ACME")
    assert (smart["session"], smart["how"], smart["smart_changed"]) == (
        "dm:ent_billing",
        "smart",
        True,
    )
    assert (smart["score"], smart["matched_terms"]) == (1.0, ["invoice", "acme"])
    assert smart["matched_turn_id"] == discussed and smart["thread_id"] == discussed
    assert "invoice" in smart["reason"] and "acme" in smart["reason"]
    # Content alone is enough (docs/engine.md, "Forks and routing").
    alone = _route(client, content="resend the ACME invoice")
    assert (alone["session"], alone["how"]) == ("dm:ent_billing", "smart")
    assert _queued_texts(database, billing.id) == [
        "the invoice for ACME",
        "resend the ACME invoice",
    ]
    fallback = _route(client, session=weather.label, smart=True, content="quantum chromodynamics")
    assert (fallback["session"], fallback["how"], fallback["smart_changed"]) == (
        "dm:ent_weather",
        "label",
        False,
    )
    assert fallback["matched_terms"] == [] and fallback["score"] is None
    assert _queued_texts(database, weather.id) == ["quantum chromodynamics"]
    same = _route(client, session=billing.label, smart=True, content="the ACME invoice")
    assert (same["how"], same["smart_changed"]) == ("smart", False)
    # Nothing matches and nothing to fall back to: 404, and nothing is queued or created.
    missing = client.post("/v1/route", json={"content": "quantum chromodynamics"}, headers=AUTH)
    assert missing.status_code == 404
    assert "nothing said so far matches" in missing.json()["error"]["message"]
    assert len(_queued_texts(database, weather.id)) == 1


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ({"content": "x", "smart": False}, "smart"),
        ({"session": "a", "persona": "b", "content": "x"}, "at most one"),
        ({"session": "a"}, "content"),
        ({"session": "a", "content": ""}, "content"),
        ({"session": "a\nb", "content": "x"}, "control"),
        ({"session": "a", "content": "x", "nope": 1}, "nope"),
        ({"session": "a", "content": "x", "mode": "sometimes"}, "mode"),
        ({"session": "a", "content": "x", "smart": "maybe"}, "smart"),
    ],
    ids=[
        "no-target-not-smart",
        "two",
        "no-content",
        "empty-content",
        "bad-label",
        "extra",
        "bad-mode",
        "bad-smart",
    ],
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
