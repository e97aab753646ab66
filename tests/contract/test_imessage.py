"""iMessage through BlueBubbles on both databases, the way a deployment runs it: the
webhook through the real app, the router, a turn, and the delivery task's path to a
loopback fake BlueBubbles server. The spec's running example: Mom texts from iMessage."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.adapters.scripted import Say, ScriptedModel
from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.settings import Settings
from tests.fakes.bluebubbles_server import FakeBlueBubbles
from tests.support import FakeClock

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bluebubbles"
PASSWORD = "bb-server-password"
SECRET = "bb-webhook-secret"
MOM = "+15559876543"
MOM_CHAT = f"iMessage;-;{MOM}"
FAMILY = "iMessage;+;chat912345678901234567"
JPEG = b"\xff\xd8\xff\xe0" + b"\x10JFIF" + b"\x00" * 40


@pytest.fixture
def server() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as fake:
        yield fake


@pytest.fixture
def graph(
    database: Database, clock: FakeClock, server: FakeBlueBubbles, tmp_path: Path
) -> Iterator[Nexus]:
    settings = Settings(
        hooks_dir=str(tmp_path / "hooks"),  # none: this is about the channel
        database_url=database.url,
        model="scripted",
        bluebubbles_url=server.url,
        bluebubbles_password=PASSWORD,
        bluebubbles_webhook_secret=SECRET,
        collect_window_ms=0,
    )
    built = bootstrap(settings, database=database, doorbell=RecordingDoorbell(), clock=clock)
    yield built
    if "platform_files" in built.__dict__:
        built.platform_files.close()


def _doorbell(graph: Nexus) -> RecordingDoorbell:
    bell = graph.doorbell
    assert isinstance(bell, RecordingDoorbell)
    return bell


def _model(graph: Nexus) -> ScriptedModel:
    model = graph.models("scripted")
    assert isinstance(model, ScriptedModel)
    return model


def _webhook(name: str, **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    body["data"].update(data)
    return body


def _post(client: TestClient, body: dict[str, Any], **query: str) -> int:
    params = query if query else {"password": PASSWORD}
    return client.post("/v1/inbound/bluebubbles", params=params, json=body).status_code


def _run(graph: Nexus) -> None:
    """Play the workers: route what arrived (the router runs the turn inline), then the
    delivery task for every chunk rung, in order, each when its delay is up (on the
    ledger's clock)."""
    graph.router.drain()
    bell, clock = _doorbell(graph), graph.clock
    assert isinstance(clock, FakeClock)
    for session_id in list(bell.sessions):  # rung rather than run inline
        graph.session_runner.run(session_id)
    while bell.deliveries:
        delivery_id, delay_ms = bell.deliveries.pop(0)
        clock.advance(delay_ms)
        graph.delivery_service.send(delivery_id)


def _deliveries(database: Database) -> list[DeliveryRecord]:
    with database.unit_of_work() as uow:
        turn_ids = uow.ledger.connection.exec_driver_sql("SELECT id FROM turns").scalars()
        return [d for t in list(turn_ids) for d in uow.ledger.deliveries.for_turn(t)]


def test_mom_texts_from_imessage_and_the_answer_goes_back_to_her_chat(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    with database.unit_of_work() as uow:  # the owner has filed her number under "Mom"
        uow.ledger.identity.create_entity("ent_mom", kind="person", name="Mom")
        uow.ledger.entities.attach("ent_mom", "imessage", MOM)
        uow.commit()
    client = TestClient(create_app(graph))
    hello = _webhook("new-message-dm.json")
    assert _post(client, hello) == 200
    assert _post(client, hello) == 200  # BlueBubbles posted it twice: stored once
    _model(graph).push(Say("Yes, I'll be there at **six**."))
    _run(graph)

    assert server.texts() == ["Yes, I'll be there at six."]  # plain text: no `**`
    [sent] = server.of("text")
    [row] = _deliveries(database)
    assert sent.body["chatGuid"] == MOM_CHAT and sent.body["tempGuid"] == row.id
    assert (row.status, row.platform, row.provider_message_id) == (
        DeliveryStatus.SENT,
        "bluebubbles",
        "FAKE-0001",
    )
    with database.reading() as uow:
        session = uow.ledger.sessions.resolve("dm:ent_mom")
        event = uow.ledger.events.get("bluebubbles:5C6A1F0E-8D2B-4E57-9B1A-3F9E2C7D4A10")
    assert session is not None, "her message did not reach her own session"
    assert event is not None and event.sender_id == MOM and event.platform == "imessage"

    # Our reply comes back as her chat's own new-message: recorded, never answered.
    echo = _webhook("new-message-from-me.json", tempGuid=row.id)
    assert _post(client, echo) == 200
    _run(graph)
    assert len(server.of("text")) == 1
    with database.reading() as uow:
        stored = uow.ledger.events.get("bluebubbles:E7D1C0B2-3A49-4F8E-A6B5-1C2D3E4F5A6B")
    assert stored is not None and stored.kind == "bot_echo"
    assert stored.disposition_detail == f"sent from this account (delivery {row.id})"


def test_a_group_photo_is_fetched_for_the_model_and_answered_in_the_group(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    photo = "at_0_A41B7C2D-0E3F-4A5B-8C6D-7E8F9A0B1C2D"
    server.files[photo] = (JPEG, "image/jpeg")  # the server's JPEG of the HEIC
    client = TestClient(create_app(graph))
    body = _webhook("new-message-group-photo.json")
    body["data"]["attachments"][0]["totalBytes"] = len(JPEG)
    assert _post(client, body, secret=SECRET) == 200
    _model(graph).push(Say("Lovely roses!"))
    _run(graph)

    assert server.texts(FAMILY) == ["Lovely roses!"]
    [download] = server.of("download")
    assert download.body["guid"] == photo and download.query == {"password": PASSWORD}
    [request] = list(_model(graph).requests)
    shown = [b for m in request.messages for b in m["content"] if b.get("type") == "image"]
    assert shown == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/jpeg",
                "data": base64.b64encode(JPEG).decode(),
            },
        }
    ]
    [row] = _deliveries(database)
    assert row.target == {"chat_guid": FAMILY}
    with database.reading() as uow:  # the group's own session, not one of its members'
        assert uow.ledger.sessions.resolve(f"group:imessage:{FAMILY}") is not None


def test_a_wrong_or_missing_secret_is_401_and_stores_nothing(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    client = TestClient(create_app(graph))
    body = _webhook("new-message-dm.json")
    assert _post(client, body, password="guess") == 401
    assert _post(client, body, secret="") == 401
    assert client.post("/v1/inbound/bluebubbles", json=body).status_code == 401
    with database.reading() as uow:
        assert uow.ledger.events.get("bluebubbles:5C6A1F0E-8D2B-4E57-9B1A-3F9E2C7D4A10") is None
    assert _post(client, _webhook("updated-message.json")) == 200  # not a message: nothing
    _run(graph)
    assert server.calls == []


def test_a_long_answer_arrives_in_order_each_chunk_under_its_own_temp_guid(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    client = TestClient(create_app(graph))
    assert _post(client, _webhook("new-message-dm.json")) == 200
    sentences = ("Dinner is at six and we bring dessert. " * 20).strip()
    paragraphs = [f"Part {n}. {sentences}" for n in range(6)]  # ~830 characters each
    _model(graph).push(Say("\n\n".join(paragraphs)))
    _run(graph)
    texts = server.texts(MOM_CHAT)
    assert len(texts) == 3 and all(len(t) <= 2000 for t in texts)
    assert "\n\n".join(texts) == "\n\n".join(paragraphs)  # broken at paragraphs only
    rows = _deliveries(database)
    assert [c.body["tempGuid"] for c in server.of("text")] == [r.id for r in rows]
    assert {r.status for r in rows} == {DeliveryStatus.SENT}


def test_a_refusing_server_fails_the_reply_and_its_error_holds_no_password(
    graph: Nexus, database: Database, server: FakeBlueBubbles
) -> None:
    client = TestClient(create_app(graph))
    assert _post(client, _webhook("new-message-dm.json")) == 200
    server.fail_next("text", 503, f"busy (password={PASSWORD})")
    server.fail_next("text", 400, "Chat does not exist!")
    _model(graph).push(Say("On my way."))
    _run(graph)
    [row] = _deliveries(database)
    assert row.status == DeliveryStatus.FAILED and row.attempts == 2
    assert "Chat does not exist!" in (row.error or "")
    assert PASSWORD not in (row.error or "")
    assert server.texts() == []
