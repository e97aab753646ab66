"""Every platform through the real app: valid → stored once; tampered, wrong secret or stale
→ 401 with nothing stored; handshakes answered as each platform expects."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.api.inbound_support import (
    CASES,
    NOW_S,
    SECRET,
    Delivery,
    app_client,
    count_events,
    json_bytes,
    sign_discord,
    sign_slack,
    sign_twilio,
)


def _post(client: TestClient, name: str, delivery: Delivery) -> int:
    response = client.post(f"/v1/inbound/{name}", content=delivery.body, headers=delivery.headers)
    return response.status_code


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_is_stored_once_and_bad_signatures_store_nothing(
    pg_database: Database, name: str
) -> None:
    signer, body, event_id, windowed = CASES[name]
    client = app_client(pg_database)
    if name != "telegram":  # Telegram signs nothing: it echoes a secret token in a header
        tampered = signer(body, SECRET, NOW_S)
        assert _post(client, name, Delivery(tampered.headers, body + b"\n")) == 401
    assert _post(client, name, signer(body, "not-the-secret", NOW_S)) == 401
    if windowed:
        assert _post(client, name, signer(body, SECRET, NOW_S - 600)) == 401
    assert count_events(pg_database) == 0
    assert _post(client, name, signer(body, SECRET, NOW_S)) in (200, 202)
    assert _post(client, name, signer(body, SECRET, NOW_S)) in (200, 202)
    assert count_events(pg_database) == 1
    with pg_database.unit_of_work() as uow:
        assert uow.ledger.events.get(event_id) is not None


def test_handshakes_are_answered_in_each_platforms_format(pg_database: Database) -> None:
    client = app_client(pg_database)
    challenge = sign_slack(
        json_bytes({"type": "url_verification", "challenge": "c-123"}), SECRET, NOW_S
    )
    answered = client.post("/v1/inbound/slack", content=challenge.body, headers=challenge.headers)
    assert answered.json() == {"challenge": "c-123"}
    ping = sign_discord(json_bytes({"type": 1, "id": "1"}), SECRET, NOW_S)
    assert client.post("/v1/inbound/discord", content=ping.body, headers=ping.headers).json() == {
        "type": 1
    }
    hub = client.get(
        "/v1/inbound/whatsapp",
        params={"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "9931"},
    )
    assert (hub.status_code, hub.text, hub.headers["content-type"].split(";")[0]) == (
        200,
        "9931",
        "text/plain",
    )
    assert (
        client.get(
            "/v1/inbound/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
        ).status_code
        == 401
    )
    sms = sign_twilio(CASES["twilio"][1], SECRET, NOW_S)
    twiml = client.post("/v1/inbound/twilio", content=sms.body, headers=sms.headers)
    assert twiml.headers["content-type"].startswith("application/xml")
    assert twiml.text.endswith("<Response></Response>")
    command = sign_discord(CASES["discord"][1], SECRET, NOW_S)
    deferred = client.post("/v1/inbound/discord", content=command.body, headers=command.headers)
    assert deferred.json() == {"type": 5}
    assert count_events(pg_database) == 2  # the SMS and the command; handshakes store nothing


def test_an_unconfigured_platform_refuses_everything(pg_database: Database) -> None:
    client = TestClient(
        create_app(bootstrap(Settings(), database=pg_database, doorbell=RecordingDoorbell()))
    )
    for name, (signer, body, _, _) in CASES.items():
        response = client.post(
            f"/v1/inbound/{name}", content=body, headers=signer(body, SECRET, NOW_S).headers
        )
        assert response.status_code == 401, name
        assert "is not set" in response.json()["error"]["message"]
    assert count_events(pg_database) == 0
