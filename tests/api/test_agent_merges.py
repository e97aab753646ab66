"""`merge_people`: an agent merges person entities under its persona's permissions, and the
merge is recorded as `POST /v1/entities/merge` records one."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fastapi.testclient import TestClient

from nexus.access.policy import load_policies
from nexus.adapters.scripted import CallTools, Say, ScriptedModel
from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from tests.support import FakeClock, route_one

TOKEN = "tok-agent-merge"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Desk:
    """The API, and a session runner whose engine answers with a scripted model."""

    def __init__(self, database: Database, clock: FakeClock) -> None:
        self.database = database
        self.graph: Nexus = bootstrap(
            Settings(api_tokens=TOKEN),
            database=database,
            doorbell=RecordingDoorbell(),
            coordination=InProcessCoordination(),
        )
        self.client = TestClient(create_app(self.graph))
        self.model = ScriptedModel()
        turns = dataclasses.replace(self.graph.turns, model_for=lambda name: self.model)
        self.runner = SessionRunner(
            database=database,
            turns=turns,
            coordination=self.graph.coordination,
            doorbell=RecordingDoorbell(),
            clock=clock,
        )
        self.senders = 0

    def person(self) -> str:
        """A new person who wrote once over iMessage: their entity id (their DM session is
        dm:ENTITY, with a turn in its queue)."""
        self.senders += 1
        sender = f"+1555000{self.senders:04d}"
        body = {
            "id": f"im:{self.senders}",
            "adapter": "imessage",
            "platform": "imessage",
            "sender": {"id": sender, "display_name": f"Person {self.senders}"},
            "container": {"kind": "dm", "id": sender},
            "text": "hello",
            "occurred_at": 1_706_889_800_000,
        }
        posted = self.client.post("/v1/events", json=body, headers=AUTH)
        assert posted.status_code == 202, posted.text
        with self.database.unit_of_work() as uow:
            routed = route_one(
                uow, posted.json()["event_id"], load_policies(None), self.graph.doorbell
            )
            assert routed.session_id is not None
            session = uow.ledger.sessions.get(routed.session_id)
            uow.commit()
        assert session is not None
        return session.label.removeprefix("dm:")

    def persona(self, name: str, permissions: dict[str, Any]) -> None:
        made = self.client.post(
            "/v1/agents", json={"name": name, "permissions": permissions}, headers=AUTH
        )
        assert made.status_code == 201, made.text
        given = self.client.put(
            f"/v1/agents/{made.json()['id']}/capabilities",
            json={"capabilities": ["people"]},
            headers=AUTH,
        )
        assert given.status_code == 200, given.text

    def ask(self, label: str, persona: str, *steps: Any) -> dict[str, Any]:
        """Send to `label` (a session of `persona`), answer with `steps`; the first tool
        result the model was given."""
        self.model.push(*steps)
        sent = self.client.post(
            f"/v1/sessions/{label}/messages",
            json={"content": "these two are one person", "persona": persona},
            headers=AUTH,
        )
        assert sent.status_code == 202, sent.text
        session_id = self.client.get(f"/v1/sessions/{label}", headers=AUTH).json()["id"]
        self.runner.run(session_id)
        for request in self.model.requests:
            for message in request.messages:
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        return block
        raise AssertionError("the model was never given a tool result")

    def record(self, root: str, merged: str) -> dict[str, Any]:
        """What a merge of `merged` into `root` left, without the ids and times that differ
        (the entity ids read as ROOT and MERGED)."""
        entity = self.client.get(f"/v1/entities/{root}", headers=AUTH).json()
        [primary] = entity["sessions"]
        label = primary["label"] if isinstance(primary, dict) else primary
        with self.database.unit_of_work() as uow:
            aliases = uow.ledger.sessions.aliases_of(label)
        queue = self.client.get(f"/v1/sessions/{label}/queue", headers=AUTH).json()["items"]
        notices = [
            {k: v for k, v in item.items() if k in ("mode", "source", "status", "payload")}
            for item in queue
            if item.get("event_id") is None
        ]
        found = {
            "merged": entity["merged"],
            "aliases": aliases,
            "primary": label,
            "notices": notices,
        }
        text = json.dumps(found).replace(root, "ROOT").replace(merged, "MERGED")
        shown: dict[str, Any] = json.loads(text)
        return shown


def test_an_agent_with_the_permission_merges_as_the_api_does(
    database: Database, clock: FakeClock
) -> None:
    desk = Desk(database, clock)
    desk.persona("registrar", {"people": {"merge": True}})
    ada, bob = desk.person(), desk.person()
    result = desk.ask(
        "office",
        "registrar",
        CallTools((("merge_people", {"into": ada, "merge": [bob]}),)),
        Say("Merged."),
    )
    assert not result.get("is_error"), result
    assert "merging" in str(result["content"])
    shown = desk.client.get(f"/v1/entities/{ada}", headers=AUTH).json()
    assert shown["merged"] == [bob]
    assert len(shown["sessions"]) == 1  # both keys lead to one primary

    cy, dee = desk.person(), desk.person()
    by_api = desk.client.post("/v1/entities/merge", json={"into": cy, "merge": [dee]}, headers=AUTH)
    assert by_api.status_code == 200, by_api.text
    by_agent, by_hand = desk.record(ada, bob), desk.record(cy, dee)
    assert by_agent == by_hand
    assert by_agent["merged"] == ["MERGED"]
    other = "MERGED" if by_agent["primary"] == "dm:ROOT" else "ROOT"
    assert by_agent["aliases"] == [[f"dm:{other}", "identity_merge"]]
    [notice] = by_agent["notices"]
    assert notice["payload"]["kind"] == "identity_merge" and notice["mode"] == "followup"


def test_an_agent_without_the_permission_gets_a_clear_error_and_merges_nothing(
    database: Database, clock: FakeClock
) -> None:
    desk = Desk(database, clock)
    desk.persona("clerk", {})
    ada, bob = desk.person(), desk.person()
    result = desk.ask(
        "front-desk",
        "clerk",
        CallTools((("merge_people", {"into": ada, "merge": [bob]}),)),
        Say("I cannot."),
    )
    assert result.get("is_error") is True
    assert "needs the permission 'people.merge'" in str(result["content"])
    assert "permissions.people" in str(result["content"])
    # Never offered to the model either.
    assert all("merge_people" not in [t.name for t in r.tools] for r in desk.model.requests)
    assert desk.client.get(f"/v1/entities/{bob}", headers=AUTH).json()["merged_into"] is None


def test_a_merge_the_ledger_would_refuse_is_a_tool_error_said_at_once(
    database: Database, clock: FakeClock
) -> None:
    desk = Desk(database, clock)
    desk.persona("registrar", {"people": {"merge": True}})
    ada = desk.person()
    result = desk.ask(
        "office",
        "registrar",
        CallTools((("merge_people", {"into": ada, "merge": ["ent_nobody"]}),)),
        Say("No such person."),
    )
    assert result.get("is_error") is True and "no entity 'ent_nobody'" in str(result["content"])
    assert desk.client.get(f"/v1/entities/{ada}", headers=AUTH).json()["merged"] == []
