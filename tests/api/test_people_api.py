"""People and aliases through the API: entities, principals, contacts, manual aliases."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from nexus.access.policy import load_policies
from nexus.api.app import create_app
from nexus.arrival.settings import principal_for
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import route_one

TOKEN = "tok-people"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: Database) -> TestClient:
    graph = bootstrap(Settings(api_tokens=TOKEN), database=database, doorbell=RecordingDoorbell())
    return TestClient(create_app(graph))


def _message(client: TestClient, database: Database, event_id: str, sender: str) -> str:
    """The session label an iMessage from `sender` went to."""
    return _routed(client, database, event_id, sender)[0]


def _routed(client: TestClient, database: Database, event_id: str, sender: str) -> tuple[str, str]:
    """An iMessage (through a bridge) from `sender`, stored and routed: (the session label
    it went to, the event's stored id)."""
    body = {
        "id": event_id,
        "adapter": "imessage",
        "platform": "imessage",
        "sender": {"id": sender, "display_name": "Ada"},
        "container": {"kind": "dm", "id": sender},
        "text": "hello",
        "occurred_at": 1_706_889_800_000,
    }
    posted = client.post("/v1/events", json=body, headers=AUTH)
    assert posted.status_code == 202
    with database.unit_of_work() as uow:
        stored = posted.json()["event_id"]
        routed = route_one(uow, stored, load_policies(None), RecordingDoorbell())
        assert routed.session_id is not None
        session = uow.ledger.sessions.get(routed.session_id)
        uow.commit()
    assert session is not None
    return session.label, stored


def _post(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, json=body, headers=AUTH)


def test_an_entity_is_created_renamed_and_made_the_owner(database: Database) -> None:
    client = _client(database)
    created = _post(client, "/v1/entities", {"name": "Ada Lovelace"})
    assert created.status_code == 201
    ada = created.json()
    assert (ada["name"], ada["principal"], ada["kind"]) == ("Ada Lovelace", "known", "person")
    assert ada["contacts"] == [] and ada["sessions"] == [] and ada["last_seen_at"] is None
    renamed = client.patch(f"/v1/entities/{ada['id']}", json={"name": "Ada"}, headers=AUTH)
    assert renamed.status_code == 200 and renamed.json()["name"] == "Ada"
    owner = client.patch(f"/v1/entities/{ada['id']}", json={"principal": "owner"}, headers=AUTH)
    assert owner.json()["principal"] == "owner"
    shown = client.get(f"/v1/entities/{ada['id']}", headers=AUTH).json()
    assert (shown["name"], shown["principal"]) == ("Ada", "owner")
    listed = client.get("/v1/entities", headers=AUTH).json()["items"]
    assert [e["id"] for e in listed] == [ada["id"]]


def test_an_attached_contact_routes_as_the_person_and_the_owner_is_seen_as_owner(
    database: Database,
) -> None:
    client = _client(database)
    ada = _post(client, "/v1/entities", {"name": "Ada", "principal": "owner"}).json()
    attached = _post(
        client, f"/v1/entities/{ada['id']}/contacts", {"platform": "imessage", "sender_id": "+1"}
    )
    assert attached.status_code == 201
    assert attached.json()["previous_entity_id"] is None
    label, event_id = _routed(client, database, "im:1", "+1")
    assert label == f"dm:{ada['id']}"
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
        assert event is not None
        principal = principal_for(uow, event)
    assert (principal.type, principal.entity_id) == ("owner", ada["id"])
    shown = client.get(f"/v1/entities/{ada['id']}", headers=AUTH).json()
    assert [(c["platform"], c["sender_id"]) for c in shown["contacts"]] == [("imessage", "+1")]
    assert shown["sessions"] == [f"dm:{ada['id']}"]
    assert shown["last_seen_at"] is not None


def test_a_contact_moves_between_entities_and_detaches_back_to_its_own(
    database: Database,
) -> None:
    client = _client(database)
    first_label = _message(client, database, "im:2", "+2")  # first contact: an entity of its own
    own = first_label.removeprefix("dm:")
    bob = _post(client, "/v1/entities", {"name": "Bob"}).json()
    moved = _post(
        client, f"/v1/entities/{bob['id']}/contacts", {"platform": "imessage", "sender_id": "+2"}
    )
    assert moved.json()["previous_entity_id"] == own
    assert _message(client, database, "im:3", "+2") == f"dm:{bob['id']}"
    detached = client.delete(
        f"/v1/entities/{bob['id']}/contacts",
        params={"platform": "imessage", "sender_id": "+2"},
        headers=AUTH,
    )
    assert detached.status_code == 200 and detached.json()["entity_id"] == own
    assert _message(client, database, "im:4", "+2") == first_label  # its old conversation
    again = client.delete(
        f"/v1/entities/{bob['id']}/contacts",
        params={"platform": "imessage", "sender_id": "+2"},
        headers=AUTH,
    )
    assert again.status_code == 404
    own_contact = client.delete(
        f"/v1/entities/{own}/contacts",
        params={"platform": "imessage", "sender_id": "+2"},
        headers=AUTH,
    )
    assert own_contact.status_code == 409 and "attach it to another" in own_contact.text


def test_merged_entities_show_as_one_person(database: Database) -> None:
    client = _client(database)
    a = _message(client, database, "im:5", "+5").removeprefix("dm:")
    b = _message(client, database, "im:6", "+6").removeprefix("dm:")
    assert _post(client, "/v1/entities/merge", {"into": a, "merge": [b]}).status_code == 200
    shown = client.get(f"/v1/entities/{a}", headers=AUTH).json()
    assert shown["merged"] == [b]
    assert sorted(c["sender_id"] for c in shown["contacts"]) == ["+5", "+6"]
    assert len(shown["sessions"]) == 1  # both keys lead to one primary
    listed = [e["id"] for e in client.get("/v1/entities", headers=AUTH).json()["items"]]
    assert b not in listed and a in listed
    everyone = client.get("/v1/entities", params={"merged": "true"}, headers=AUTH).json()
    assert b in [e["id"] for e in everyone["items"]]
    refused = client.patch(f"/v1/entities/{b}", json={"principal": "owner"}, headers=AUTH)
    assert refused.status_code == 409 and a in refused.json()["error"]["message"]


def test_bad_entity_requests_are_refused_and_change_nothing(database: Database) -> None:
    client = _client(database)
    ada = _post(client, "/v1/entities", {"name": "Ada"}).json()
    contacts = f"/v1/entities/{ada['id']}/contacts"
    cases = [
        (client.patch(f"/v1/entities/{ada['id']}", json={}, headers=AUTH), 400),
        (client.patch(f"/v1/entities/{ada['id']}", json={"principal": "admin"}, headers=AUTH), 422),
        (client.patch("/v1/entities/ent_none", json={"name": "x"}, headers=AUTH), 404),
        (client.get("/v1/entities/ent_none", headers=AUTH), 404),
        (_post(client, "/v1/entities", {"name": "A\x00da"}), 422),
        (_post(client, "/v1/entities", {"name": ""}), 422),
        (_post(client, "/v1/entities", {"name": "x", "extra": 1}), 422),
        (_post(client, contacts, {"platform": "sms"}), 422),
        (_post(client, contacts, {"platform": "imessage", "sender_id": "a\nb"}), 422),
        (_post(client, "/v1/entities/ent_x/contacts", {"platform": "sms", "sender_id": "9"}), 404),
    ]  # fmt: skip
    assert [response.status_code for response, _ in cases] == [status for _, status in cases]
    shown = client.get(f"/v1/entities/{ada['id']}", headers=AUTH).json()
    assert (shown["name"], shown["principal"], shown["contacts"]) == ("Ada", "known", [])
    assert len(client.get("/v1/entities", headers=AUTH).json()["items"]) == 1


def test_a_manual_alias_leads_to_its_session_and_can_be_removed(database: Database) -> None:
    client = _client(database)
    for label in ("support", "team"):
        assert _post(client, "/v1/sessions", {"label": label}).status_code == 201
    created = _post(client, "/v1/aliases", {"alias": "help", "session": "support"})
    assert created.status_code == 201
    assert created.json() | {"created_at": 0} == {
        "alias": "help",
        "session": "support",
        "resolves_to": "support",
        "reason": "manual",
        "created_at": 0,
    }
    assert client.get("/v1/sessions/help", headers=AUTH).json()["label"] == "support"
    chained = _post(client, "/v1/aliases", {"alias": "desk", "session": "help"})
    assert chained.json()["session"] == "support"  # named by an alias: its session
    listed = client.get("/v1/aliases", headers=AUTH).json()["items"]
    assert [(a["alias"], a["session"]) for a in listed] == [
        ("desk", "support"),
        ("help", "support"),
    ]
    removed = client.delete("/v1/aliases/help", headers=AUTH)
    assert removed.status_code == 200 and removed.json()["session"] == "support"
    assert client.get("/v1/sessions/help", headers=AUTH).status_code == 404
    assert client.get("/v1/aliases/help", headers=AUTH).status_code == 404
    assert client.delete("/v1/aliases/help", headers=AUTH).status_code == 404


def test_alias_circles_and_bad_aliases_are_refused_and_change_nothing(database: Database) -> None:
    client = _client(database)
    for label in ("a", "b"):
        _post(client, "/v1/sessions", {"label": label})
    assert _post(client, "/v1/aliases", {"alias": "x", "session": "a"}).status_code == 201
    assert _post(client, "/v1/aliases", {"alias": "a", "session": "b"}).status_code == 201
    circle = _post(client, "/v1/aliases", {"alias": "b", "session": "x"})
    assert circle.status_code == 409 and circle.json()["error"]["type"] == "alias_cycle"
    assert "'x' leads to 'b'" in circle.json()["error"]["message"]
    itself = _post(client, "/v1/aliases", {"alias": "b", "session": "b"})
    assert itself.status_code == 409 and itself.json()["error"]["type"] == "alias_cycle"
    taken = _post(client, "/v1/aliases", {"alias": "x", "session": "b"})
    assert taken.status_code == 409 and taken.json()["error"]["type"] == "alias_exists"
    nowhere = _post(client, "/v1/aliases", {"alias": "y", "session": "nope"})
    assert nowhere.status_code == 404
    control = _post(client, "/v1/aliases", {"alias": "y\nz", "session": "a"})
    assert control.status_code == 422
    slash = _post(client, "/v1/aliases", {"alias": "y/turns", "session": "a"})
    assert slash.status_code == 422 and "/" in slash.json()["error"]["message"]
    listed = client.get("/v1/aliases", headers=AUTH).json()["items"]
    assert [(a["alias"], a["session"], a["resolves_to"]) for a in listed] == [
        ("a", "b", "b"),
        ("x", "a", "b"),
    ]
