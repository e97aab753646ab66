"""`messages.source`: what the ledger stores for each kind of input, driven through the door
each kind comes in by (the API, a platform, a signed webhook, a hook, the timer, an agent,
Nexus's own notice), then answered by a session run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fastapi.testclient import TestClient

from nexus.access.policy import load_policies
from nexus.adapters.scripted import CallTools, Say, ScriptedModel
from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import MessageRole
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from nexus.timer.tick import tick, timer_event_id
from tests.api.inbound_support import WHSEC, sign_webhook
from tests.support import FakeClock, hook_runner, route_one

TOKEN = "tok-sources"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

TRIGGER_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing
HOOK = HookMeta(name="invoices")
def evaluate(ctx: HookContext) -> HookResult:
    if "invoice" not in (ctx.event.text or ""):
        return HookResult()
    return HookResult(fire=True, routing=Routing(kind="session", target="finance"),
                      prompt="file this invoice")
"""
CRON_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing
HOOK = HookMeta(name="daily", schedule="* * * * *")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult(fire=True, routing=Routing(kind="session", target="digest"),
                      prompt="write the digest")
"""


class Desk:
    def __init__(self, database: Database, clock: FakeClock) -> None:
        self.database = database
        self.clock = clock
        self.graph: Nexus = bootstrap(
            Settings(api_tokens=TOKEN, webhook_secret=WHSEC),
            database=database,
            doorbell=RecordingDoorbell(),
            coordination=InProcessCoordination(),
            clock=clock,
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

    def route(self, event_id: str) -> str:
        """The router's run over a stored event: the label of the session it went to."""
        with self.database.unit_of_work() as uow:
            routed = route_one(uow, event_id, load_policies(None), RecordingDoorbell())
            assert routed.session_id is not None, routed
            session = uow.ledger.sessions.get(routed.session_id)
            uow.commit()
        assert session is not None
        return session.label

    def answered(self, label: str) -> list[str]:
        """Run `label`'s session; the sources of the user messages its latest turn stored."""
        with self.database.unit_of_work() as uow:
            session = uow.ledger.sessions.resolve(label)
        assert session is not None, label
        self.runner.run(session.id)
        with self.database.unit_of_work() as uow:
            head = uow.ledger.sessions.get(session.id)
            assert head is not None and head.thread_id is not None
            view = uow.ledger.threads.get_turn(head.thread_id)
        assert view is not None
        return [str(m.source) for m in view.messages if m.role == MessageRole.USER]

    def send(self, label: str, **body: object) -> str:
        sent = self.client.post(
            f"/v1/sessions/{label}/messages", json={"content": "hi", **body}, headers=AUTH
        )
        assert sent.status_code == 202, sent.text
        return str(sent.json()["event_id"])

    def imessage(self, number: int) -> str:
        sender = f"+1555000{number:04d}"
        body = {
            "id": f"im:{number}",
            "adapter": "imessage",
            "platform": "imessage",
            "sender": {"id": sender, "display_name": "Ada"},
            "container": {"kind": "dm", "id": sender},
            "text": "hello",
            "occurred_at": self.clock.now,
        }
        posted = self.client.post("/v1/events", json=body, headers=AUTH)
        assert posted.status_code == 202, posted.text
        return self.route(posted.json()["event_id"])


def test_each_kind_of_input_is_stored_with_its_source(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    desk = Desk(database, clock)

    # human: a person through the API, and through a platform
    desk.send("console")
    assert desk.answered("console") == ["human"]
    ada = desk.imessage(1)
    assert desk.answered(ada) == ["human"]

    # webhook: a signed Standard Webhooks delivery, and an API caller that says so
    body = json.dumps({"type": "message.created", "data": {"text": "deploy finished"}})
    delivery = sign_webhook(body.encode(), "platform-secret", clock.now // 1000)
    posted = desk.client.post(
        "/v1/inbound/webhook", content=delivery.body, headers=delivery.headers
    )
    assert posted.status_code in (200, 202), posted.text
    hooked = desk.route("webhook:msg_1")
    assert desk.answered(hooked) == ["webhook"]
    desk.send("ci", source="webhook")
    assert desk.answered("ci") == ["webhook"]

    # trigger: a hook fired by a message
    hooks = hook_runner(database, clock, tmp_path, invoices=TRIGGER_HOOK, daily=CRON_HOOK)
    about = desk.send("mail", content="the ACME invoice")
    hooks.run(about)
    assert desk.answered("finance") == ["trigger"]

    # cron: a scheduled hook fired by the timer's minute
    with database.unit_of_work() as uow:
        tick(uow, RecordingDoorbell(), now_ms=clock.now)
        uow.commit()
    hooks.run(timer_event_id(clock.now - clock.now % 60_000))
    assert desk.answered("digest") == ["cron"]

    # agent: a message one session's agent sends another
    agents = desk.client.post("/v1/agents", json={"name": "boss"}, headers=AUTH).json()
    desk.client.put(
        f"/v1/agents/{agents['id']}/capabilities", json={"capabilities": ["agents"]}, headers=AUTH
    )
    desk.send("helper")
    desk.answered("helper")
    desk.model.push(
        CallTools(
            (
                (
                    "agent_send",
                    {"op": "message", "text": "please help", "target": {"session": "helper"}},
                ),
            )
        ),
        Say("sent"),
    )
    desk.send("manager", persona="boss")
    desk.answered("manager")
    assert desk.answered("helper") == ["agent"]

    # event: Nexus's own notice, a merge's, to the person's primary session
    bob = desk.imessage(2)
    desk.answered(bob)
    merged = desk.client.post(
        "/v1/entities/merge",
        json={"into": ada.removeprefix("dm:"), "merge": [bob.removeprefix("dm:")]},
        headers=AUTH,
    )
    assert merged.status_code == 200, merged.text
    assert desk.answered(merged.json()["primary_session"]) == ["event"]
