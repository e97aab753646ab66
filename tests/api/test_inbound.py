"""Inbound webhooks end to end through the app: verify, store once, answer after commit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.models import Contact, Entity, Event, table_of
from nexus.settings import Settings
from tests.support import free_port

TOKEN = "telegram-secret"
HEADERS = {"X-Telegram-Bot-Api-Secret-Token": TOKEN, "Content-Type": "application/json"}


def _update(update_id: int = 1, text: str = "hello", **message: Any) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": 7,
            "date": 1_767_225_600,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "first_name": "Ada", "is_bot": False},
            "text": text,
            **message,
        },
    }


def _count(database: Database, model: type) -> int:
    with database.unit_of_work() as uow:
        return int(
            uow.connection.execute(select(func.count()).select_from(table_of(model))).scalar_one()
        )


class Client:
    def __init__(self, database: Database, **settings: Any) -> None:
        self.doorbell = RecordingDoorbell()
        config = Settings(**{"telegram_secret_token": TOKEN, **settings})
        self.app = create_app(bootstrap(config, database=database, doorbell=self.doorbell))

    def post(self, path: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None):
        chosen = HEADERS if headers is None else headers
        return asyncio.run(self._post_many(path, [body], chosen))[0]

    def post_many(self, path: str, bodies: list[bytes | dict[str, Any]]) -> list[httpx.Response]:
        return asyncio.run(self._post_many(path, bodies, HEADERS))

    async def _post_many(self, path: str, bodies: list[Any], headers: dict[str, str]):
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://nexus.test") as client:
            return await asyncio.gather(
                *(
                    client.post(
                        path, content=b if isinstance(b, bytes) else json.dumps(b), headers=headers
                    )
                    for b in bodies
                )
            )


def test_a_message_is_stored_with_its_sender_and_rings_after_commit(database: Database) -> None:
    client = Client(database)
    response = client.post("/v1/inbound/telegram", _update())
    assert response.status_code == 200
    assert response.json() == {
        "accepted": [{"event_id": "telegram:1", "duplicate": False, "routable": True}]
    }
    assert client.doorbell.events == ["telegram:1"]
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:1")
        entity = uow.ledger.identity.contact_entity("telegram", "42")
    assert stored is not None
    assert (stored.text, stored.sender_name, stored.container_kind) == ("hello", "Ada", "dm")
    assert stored.message_id == "7"
    assert stored.contact_id is not None
    assert entity is not None and entity.startswith("ent_")


def test_a_redelivery_is_a_success_that_stores_and_rings_nothing(database: Database) -> None:
    client = Client(database)
    client.post("/v1/inbound/telegram", _update())
    again = client.post("/v1/inbound/telegram", _update(text="retried"))
    assert again.status_code == 200
    assert again.json()["accepted"][0]["duplicate"] is True
    assert client.doorbell.events == ["telegram:1"]
    assert _count(database, Event) == 1


def test_an_ignored_update_is_recorded_with_its_disposition(database: Database) -> None:
    client = Client(database)
    update = _update()
    update["edited_message"] = update.pop("message")
    response = client.post("/v1/inbound/telegram", update)
    assert response.status_code == 200
    assert response.json()["accepted"][0]["routable"] is False
    assert client.doorbell.events == []
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:1")
    assert stored is not None
    assert (stored.status, stored.disposition) == ("processed", "ignored")
    assert stored.disposition_detail == "edits are not answered"
    assert _count(database, Contact) == 0  # nobody spoke to us


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-Telegram-Bot-Api-Secret-Token": "wrong"}, "does not match"),
        ({}, "missing"),
    ],
)
def test_a_bad_signature_is_401_and_stores_nothing(
    database: Database, headers: dict[str, str], message: str
) -> None:
    client = Client(database)
    response = client.post("/v1/inbound/telegram", _update(), headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "invalid_signature"
    assert message in response.json()["error"]["message"]
    assert _count(database, Event) == 0
    assert client.doorbell.events == []


def test_an_unconfigured_adapter_refuses_everything(database: Database) -> None:
    client = Client(database, telegram_secret_token=None)
    response = client.post("/v1/inbound/telegram", _update())
    assert response.status_code == 401
    assert "NEXUS_TELEGRAM_SECRET_TOKEN" in response.json()["error"]["message"]


def test_malformed_body_is_400_and_stores_nothing(database: Database) -> None:
    client = Client(database)
    response = client.post("/v1/inbound/telegram", b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "malformed_request"
    assert _count(database, Event) == 0


def test_unknown_adapter_is_404(database: Database) -> None:
    response = Client(database).post("/v1/inbound/myspace", _update())
    assert response.status_code == 404
    assert "telegram" in response.json()["error"]["message"]


def test_a_body_over_the_limit_is_413(database: Database) -> None:
    client = Client(database, max_body_bytes=2048)
    response = client.post("/v1/inbound/telegram", _update(text="x" * 4096))
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"
    assert _count(database, Event) == 0


@pytest.mark.postgres
def test_ten_concurrent_deliveries_of_one_update_store_one_event(pg_database: Database) -> None:
    client = Client(pg_database)
    responses = client.post_many("/v1/inbound/telegram", [_update()] * 10)
    assert [r.status_code for r in responses] == [200] * 10
    assert sum(not r.json()["accepted"][0]["duplicate"] for r in responses) == 1
    assert _count(pg_database, Event) == 1
    assert _count(pg_database, Contact) == 1
    assert _count(pg_database, Entity) == 1
    assert client.doorbell.events == ["telegram:1"]


@pytest.mark.postgres
def test_an_unreachable_database_is_503_with_the_error_shape() -> None:
    # Nothing listens on this port: every connection is refused, as while Postgres restarts.
    gone = Database(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nexus")
    client = Client(gone)
    response = client.post("/v1/inbound/telegram", _update())
    assert response.status_code == 503, response.text
    assert response.json()["error"]["type"] == "unavailable"
    assert response.headers["retry-after"] == "5"
    assert client.doorbell.events == []  # nothing was recorded, so nothing may ring


def test_a_nul_character_from_a_platform_is_kept_as_a_replacement_character(
    database: Database,
) -> None:
    client = Client(database)
    update = _update(text="before\x00after")
    update["message"]["from"]["first_name"] = "A\x00da"
    response = client.post("/v1/inbound/telegram", update)
    assert response.status_code == 200, response.text
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get("telegram:1")
        payload = uow.ledger.events.payload_of("telegram:1")
    assert event is not None and event.text == "before\ufffdafter"
    assert event.sender_name == "A\ufffdda"
    assert payload["message"]["text"] == "before\ufffdafter"


def test_an_unknown_route_answers_in_the_error_shape(database: Database) -> None:
    client = Client(database, api_tokens="tok")
    response = client.post("/v1/no/such/route", b"{}", {"Authorization": "Bearer tok"})
    assert response.status_code == 404
    assert response.json() == {"error": {"type": "not_found", "message": "Not Found"}}
    # Without a token, /v1 says nothing about which routes exist.
    assert client.post("/v1/no/such/route", b"{}", {}).status_code == 401
