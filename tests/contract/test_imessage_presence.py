"""iMessage presence, end to end against a loopback fake BlueBubbles server: "typing…" in
the chat while a turn answers, and a tapback the model puts on the message it answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.adapters.scripted import CallTools, Fail, Say, ScriptedModel
from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.model import ModelError
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.settings import Settings
from tests.fakes.bluebubbles_server import FakeBlueBubbles
from tests.support import FakeClock

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bluebubbles"
PASSWORD = "bb-server-password"
SECRET = "bb-webhook-secret"
MOM_CHAT = "iMessage;-;+15559876543"
HER_MESSAGE = "5C6A1F0E-8D2B-4E57-9B1A-3F9E2C7D4A10"  # new-message-dm.json's guid


@pytest.fixture
def server() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as fake:
        yield fake


@pytest.fixture
def graph(database: Database, clock: FakeClock, server: FakeBlueBubbles, tmp_path: Path) -> Nexus:
    settings = Settings(
        hooks_dir=str(tmp_path / "hooks"),
        database_url=database.url,
        model="scripted",
        bluebubbles_url=server.url,
        bluebubbles_password=PASSWORD,
        bluebubbles_webhook_secret=SECRET,
        collect_window_ms=0,
    )
    return bootstrap(settings, database=database, doorbell=RecordingDoorbell(), clock=clock)


def _model(graph: Nexus) -> ScriptedModel:
    model = graph.models("scripted")
    assert isinstance(model, ScriptedModel)
    return model


def _arrives(graph: Nexus) -> None:
    body: dict[str, Any] = json.loads((FIXTURES / "new-message-dm.json").read_text())
    client = TestClient(create_app(graph))
    response = client.post("/v1/inbound/bluebubbles", params={"password": PASSWORD}, json=body)
    assert response.status_code == 200


def _run(graph: Nexus) -> None:
    """Route (the turn runs inline), then the delivery task for every chunk rung, in order."""
    graph.router.drain()
    bell, clock = graph.doorbell, graph.clock
    assert isinstance(bell, RecordingDoorbell) and isinstance(clock, FakeClock)
    for session_id in list(bell.sessions):
        graph.session_runner.run(session_id)
    while bell.deliveries:
        delivery_id, delay_ms = bell.deliveries.pop(0)
        clock.advance(delay_ms)
        graph.delivery_service.send(delivery_id)


def _deliveries(database: Database) -> list[DeliveryRecord]:
    with database.unit_of_work() as uow:
        turn_ids = uow.ledger.connection.exec_driver_sql("SELECT id FROM turns").scalars()
        return [d for t in list(turn_ids) for d in uow.ledger.deliveries.for_turn(t)]


def _grant_reactions(database: Database) -> None:
    reactions = CapabilityRegistry().get("reactions")
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")  # whom the default policy answers with
        uow.ledger.agents.set_capabilities(
            persona.id,
            [(reactions.id, reactions.name, reactions.description, reactions.status)],
        )
        uow.commit()


def _typing(server: FakeBlueBubbles) -> list[tuple[str, str | None]]:
    return [(call.method, call.chat) for call in server.of("typing")]


def test_a_turn_shows_typing_in_her_chat_then_stops_it(
    graph: Nexus, server: FakeBlueBubbles
) -> None:
    _arrives(graph)
    _model(graph).push(Say("On my way."))
    _run(graph)
    graph.typing_indicator.flush()
    assert _typing(server) == [("POST", MOM_CHAT), ("DELETE", MOM_CHAT)]
    assert server.texts(MOM_CHAT) == ["On my way."]


def test_a_failed_turn_stops_typing_too(graph: Nexus, server: FakeBlueBubbles) -> None:
    _arrives(graph)
    _model(graph).push(Fail(ModelError(kind="model_error", message="overloaded", retryable=True)))
    _run(graph)
    graph.typing_indicator.flush()
    assert _typing(server) == [("POST", MOM_CHAT), ("DELETE", MOM_CHAT)]
    assert server.texts() == []


def test_a_refused_or_stuck_typing_call_never_holds_or_fails_the_turn(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    server.hold_next("typing")  # "typing on" is taken and never answered while the turn runs
    _arrives(graph)
    _model(graph).push(Say("On my way."))
    _run(graph)
    # The turn committed and its answer went out while the typing call was still held.
    assert server.texts(MOM_CHAT) == ["On my way."]
    [row] = _deliveries(database)
    assert row.status == DeliveryStatus.SENT
    server.release()
    graph.typing_indicator.flush()

    server.fail_next("typing", 500, "Private API is not enabled")
    _arrives_again(graph)
    _model(graph).push(Say("Still on my way."))
    _run(graph)
    graph.typing_indicator.flush()
    assert server.texts(MOM_CHAT) == ["On my way.", "Still on my way."]


def _arrives_again(graph: Nexus) -> None:
    body: dict[str, Any] = json.loads((FIXTURES / "new-message-dm.json").read_text())
    body["data"]["guid"] = "AAAA0000-1111-2222-3333-444455556666"
    body["data"]["text"] = "Are you coming?"
    client = TestClient(create_app(graph))
    response = client.post("/v1/inbound/bluebubbles", params={"password": PASSWORD}, json=body)
    assert response.status_code == 200


def test_the_model_loves_her_message_with_a_tapback_once(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    _grant_reactions(database)
    _arrives(graph)
    _model(graph).push(CallTools((("react", {"reaction": "love"}),)), Say("See you at six!"))
    _run(graph)
    [react] = server.of("react")
    assert react.body == {
        "chatGuid": MOM_CHAT,
        "selectedMessageGuid": HER_MESSAGE,
        "reaction": "love",
    }
    assert server.texts(MOM_CHAT) == ["See you at six!"]
    rows = _deliveries(database)
    assert [r.status for r in rows] == [DeliveryStatus.SENT, DeliveryStatus.SENT]
    assert rows[-1].target["tapback"] == {"message_guid": HER_MESSAGE, "reaction": "love"}


def test_a_tapback_alone_answers_without_text(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    _grant_reactions(database)
    _arrives(graph)
    _model(graph).push(CallTools((("react", {"reaction": "like"}),)), Say("NO_REPLY"))
    _run(graph)
    assert [c.body["reaction"] for c in server.of("react")] == ["like"]
    assert server.texts() == []
    [row] = _deliveries(database)
    assert row.status == DeliveryStatus.SENT and row.target["tapback"]["reaction"] == "like"
