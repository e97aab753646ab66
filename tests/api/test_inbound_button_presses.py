"""A pressed button through the real app: stored as a callback holding the button's value,
and acknowledged the way each platform needs."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

from nexus.db import Database
from tests.api.inbound_support import (
    NOW_S,
    SECRET,
    Delivery,
    app_client,
    json_bytes,
    sign_discord,
    sign_hub,
    sign_slack,
    sign_telegram,
)


def _stored(database: Database, event_id: str) -> tuple[str, str | None]:
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    assert event is not None, event_id
    return event.kind, event.text


def test_a_telegram_press_is_answered_with_answer_callback_query(pg_database: Database) -> None:
    client = app_client(pg_database)
    update = {
        "update_id": 7001,
        "callback_query": {
            "id": "cbq-1", "data": "pay", "from": {"id": 42, "first_name": "Ann"},
            "message": {"message_id": 9, "date": NOW_S, "chat": {"id": 42, "type": "private"}},
        },
    }  # fmt: skip
    press = sign_telegram(json_bytes(update), SECRET, NOW_S)
    answer = client.post("/v1/inbound/telegram", content=press.body, headers=press.headers)
    assert answer.status_code == 200
    assert answer.json() == {"method": "answerCallbackQuery", "callback_query_id": "cbq-1"}
    assert _stored(pg_database, "telegram:7001") == ("callback", "pay")


def test_a_slack_press_is_acknowledged_with_a_plain_200(pg_database: Database) -> None:
    client = app_client(pg_database)
    payload = {
        "type": "block_actions", "trigger_id": "111.222.abc",
        "team": {"id": "T1"}, "user": {"id": "U1", "name": "ann"}, "channel": {"id": "C1"},
        "container": {"type": "message", "message_ts": "1.2", "channel_id": "C1"},
        "actions": [{"type": "button", "action_id": "nexus_0_0", "value": "pay"}],
    }  # fmt: skip
    body = urlencode({"payload": json.dumps(payload)}).encode()
    signed = sign_slack(body, SECRET, NOW_S)
    headers = {**signed.headers, "Content-Type": "application/x-www-form-urlencoded"}
    answer = client.post("/v1/inbound/slack", content=body, headers=headers)
    assert answer.status_code in (200, 202)
    assert _stored(pg_database, "slack:interaction:111.222.abc") == ("callback", "pay")


def test_a_discord_press_is_deferred(pg_database: Database) -> None:
    client = app_client(pg_database)
    interaction = {
        "type": 3, "id": "1234567890123456789", "application_id": "APP", "token": "t",
        "guild_id": "G1", "channel_id": "C7", "channel": {"id": "C7", "type": 0},
        "member": {"user": {"id": "9001", "username": "ann"}},
        "data": {"custom_id": "pay", "component_type": 2}, "message": {"id": "777"},
    }  # fmt: skip
    press: Delivery = sign_discord(json_bytes(interaction), SECRET, NOW_S)
    answer = client.post("/v1/inbound/discord", content=press.body, headers=press.headers)
    assert answer.json() == {"type": 5}
    assert _stored(pg_database, "discord:1234567890123456789") == ("callback", "pay")


def _whatsapp_fixture(name: str) -> bytes:
    path = Path(__file__).parent.parent / "fixtures" / "whatsapp" / name
    return path.read_bytes()


def test_a_whatsapp_reply_button_or_list_row_is_a_callback_holding_its_id(
    pg_database: Database,
) -> None:
    client = app_client(pg_database)
    for name, event_id, value in (
        ("interactive_button_reply.json", "whatsapp:wamid.xyzxyz", "callback_data"),
        ("interactive_list_reply.json", "whatsapp:wamid.listpick", "pay"),
    ):
        press = sign_hub(_whatsapp_fixture(name), SECRET, NOW_S)
        answer = client.post("/v1/inbound/whatsapp", content=press.body, headers=press.headers)
        assert answer.status_code == 200, answer.text
        # The id Nexus gave the choice (its value), not the title the person saw.
        assert _stored(pg_database, event_id) == ("callback", value)
