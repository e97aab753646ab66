"""What an API caller may claim: events in their own id namespace, never posing as a platform
(unless the token is an admin's), no internal message sources, labels that cannot collide
with a sub-resource's path."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.api.auth import Caller
from nexus.api.events import refusal, stored_id
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.records import NewSession
from nexus.settings import Settings

USER = {"Authorization": "Bearer user-token"}
OTHER = {"Authorization": "Bearer other-token"}
ADMIN = {"Authorization": "Bearer admin-token"}


@pytest.fixture
def graph(database: Database) -> Nexus:
    settings = Settings(api_tokens="user-token,other-token", api_admin_tokens="admin-token")
    return bootstrap(settings, database=database, doorbell=RecordingDoorbell())


@pytest.fixture
def client(graph: Nexus) -> TestClient:
    return TestClient(create_app(graph))


def _event(event_id: str, adapter: str = "imessage", **changes: Any) -> dict[str, Any]:
    return {
        "id": event_id, "adapter": adapter, "platform": adapter,
        "sender": {"id": "+15550100"}, "container": {"kind": "dm", "id": "+15550100"},
        "text": "hello", "occurred_at": 1706889800000, **changes,
    }  # fmt: skip


def _count_events(graph: Nexus) -> int:
    with graph.database.unit_of_work() as uow:
        return len(uow.ledger.events.recent(limit=1000))


def test_a_posted_event_lives_in_the_callers_namespace(client: TestClient, graph: Nexus) -> None:
    first = client.post("/v1/events", json=_event("imessage:1"), headers=USER)
    retry = client.post("/v1/events", json=_event("imessage:1"), headers=USER)
    other = client.post("/v1/events", json=_event("imessage:1"), headers=OTHER)
    assert (first.status_code, retry.status_code, other.status_code) == (202, 200, 202)
    stored = first.json()["event_id"]
    assert stored.startswith("api:") and stored.endswith(":imessage:1")
    assert retry.json()["event_id"] == stored  # a retry is still deduplicated
    assert other.json()["event_id"] != stored  # another caller cannot squat this one's ids
    found = client.get(f"/v1/events/{stored}", headers=USER)
    assert found.status_code == 200 and found.json()["adapter"] == "imessage"


def test_a_posted_event_never_squats_a_platforms_id(client: TestClient, graph: Nexus) -> None:
    squat = client.post("/v1/events", json=_event("telegram:1001", "telegram"), headers=ADMIN)
    assert squat.status_code == 202 and squat.json()["event_id"] != "telegram:1001"
    real = NexusEvent(
        id="telegram:1001", adapter="telegram", platform="telegram", occurred_at=1,
        sender=Author(id="42"), container=Container(kind="dm", id="42"), text="real",
    )  # fmt: skip
    with graph.database.unit_of_work() as uow:
        [result] = ingest(uow, [real], graph.doorbell)
        uow.commit()
    assert result.stored  # the platform's own update is not taken for a redelivery


@pytest.mark.parametrize(
    "claims",
    [
        {"adapter": "telegram", "platform": "telegram"},
        {"adapter": "mybridge", "platform": "slack"},
        {"adapter": "webhook", "platform": "mybridge"},
        {"adapter": "api", "platform": "api"},
        {"adapter": "agent", "platform": "agent"},
    ],
    ids=["telegram", "slack-platform", "webhook", "api", "agent"],
)
def test_a_user_token_cannot_post_as_a_platform_nexus_serves(
    client: TestClient, graph: Nexus, claims: dict[str, str]
) -> None:
    answer = client.post("/v1/events", json=_event("x:1") | claims, headers=USER)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["type"] == "forbidden"
    assert "NEXUS_API_ADMIN_TOKENS" in answer.json()["error"]["message"]
    assert _count_events(graph) == 0  # nothing was stored


def test_an_admin_token_may_post_as_a_platform(client: TestClient) -> None:
    answer = client.post("/v1/events", json=_event("telegram:7", "telegram"), headers=ADMIN)
    assert answer.status_code == 202


@pytest.mark.parametrize("field", ["adapter", "platform"])
def test_an_overlong_adapter_or_platform_is_422(client: TestClient, field: str) -> None:
    answer = client.post("/v1/events", json=_event("x:1") | {field: "a" * 65}, headers=USER)
    assert answer.status_code == 422 and field in answer.json()["error"]["message"]


@pytest.mark.parametrize("source", ["agent", "cron", "trigger", "event"])
def test_an_api_caller_cannot_claim_an_internal_source(client: TestClient, source: str) -> None:
    message = {"content": "hi", "source": source}
    for url, body in (
        ("/v1/sessions/main/messages", message),
        ("/v1/route", message | {"persona": "atlas"}),
    ):
        answer = client.post(url, json=body, headers=USER)
        assert answer.status_code == 422, (url, answer.text)
        assert "source" in answer.json()["error"]["message"]
    human = client.post("/v1/sessions/main/messages", json={"content": "hi"}, headers=USER)
    assert human.status_code == 202


@pytest.mark.parametrize("label", ["a/turns", "a/b", "/"])
def test_a_new_label_with_a_slash_is_refused_everywhere(client: TestClient, label: str) -> None:
    created = client.post("/v1/sessions", json={"label": label, "persona": "atlas"}, headers=USER)
    assert created.status_code == 422 and "'/'" in created.json()["error"]["message"]
    quoted = label.replace("/", "%2F")
    sent = client.post(f"/v1/sessions/{quoted}/messages", json={"content": "hi"}, headers=USER)
    assert sent.status_code == 422 and "'/'" in sent.json()["error"]["message"]
    forked = client.post("/v1/turns/01TURN/fork", json={"label": label}, headers=USER)
    assert forked.status_code == 422 and "'/'" in forked.json()["error"]["message"]
    assert client.get("/v1/sessions", headers=USER).json()["items"] == []


def test_an_existing_label_with_a_slash_stays_addressable(client: TestClient, graph: Nexus) -> None:
    # A platform's own key may hold one (a GitHub repository is owner/name).
    with graph.database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        uow.ledger.sessions.create(NewSession(label="group:github:o/r", persona_id=persona.id))
        uow.commit()
    sent = client.post(
        "/v1/sessions/group:github:o/r/messages", json={"content": "hi"}, headers=USER
    )
    assert sent.status_code == 202 and sent.json()["session"] == "group:github:o/r"


def test_the_posting_rules_are_pure_decisions() -> None:
    user, admin = Caller(kind="token", token="abcd1234"), Caller(kind="token", admin=True)
    bridge = NexusEvent(id="matrix:1", adapter="matrix", platform="matrix", occurred_at=1)
    posing = bridge.model_copy(update={"platform": "telegram"})
    assert refusal(user, bridge, {"telegram"}) is None
    assert "'telegram'" in (refusal(user, posing, {"telegram"}) or "")
    assert refusal(admin, posing, {"telegram"}) is None
    assert refusal(user, bridge.model_copy(update={"adapter": "timer"}), ()) is not None
    assert stored_id(user, "matrix:1") == "api:abcd1234:matrix:1"
    assert stored_id(Caller(kind="loopback", admin=True), "x:1") == "api:local:x:1"
