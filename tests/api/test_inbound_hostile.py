"""Correctly signed but hostile bodies at every adapter, through the real app and ledger:
never a 5xx; every 2xx has its rows; every 4xx stored nothing."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

from nexus.adapters.inbound.base import InboundRequest, Rejected
from nexus.db import Database
from nexus.ingest.service import storable
from tests.api.hostile_bodies import body_for, header_overrides
from tests.api.inbound_support import (
    BASE,
    CASES,
    MEDIA_BODIES,
    NOW_S,
    SECRET,
    Delivery,
    app_client,
    count_events,
    json_bytes,
)

ADAPTERS = sorted(CASES)
# Per adapter: SQLite takes the bulk of the examples, Postgres (whose column limits and
# JSONB are stricter) a smaller run. Eight adapters in all stay well under a minute.
EXAMPLES = {"sqlite": 150, "postgresql": 30}


def _expected_ids(client: TestClient, name: str, delivery: Delivery) -> list[str]:
    """The ids the adapter makes of this delivery, as the ledger stores them."""
    graph = client.app.state.nexus.nexus  # type: ignore[attr-defined]
    adapter = graph.inbound_adapters[name]
    request = InboundRequest(
        "POST",
        f"{BASE}/v1/inbound/{name}",
        {k.lower(): v for k, v in delivery.headers.items()},
        delivery.body,
    )
    try:
        return [storable(event).id for event in adapter.parse(request).events]
    except Rejected:
        return []


def _stored(database: Database, ids: list[str]) -> list[str]:
    with database.unit_of_work() as uow:
        return [i for i in ids if uow.ledger.events.get(i) is None]


@pytest.mark.parametrize(
    ("name", "media"),
    [(name, False) for name in ADAPTERS] + [(name, True) for name in sorted(MEDIA_BODIES)],
    ids=[*ADAPTERS, *(f"{name}-attachments" for name in sorted(MEDIA_BODIES))],
)
def test_signed_hostile_bodies_never_5xx_and_every_2xx_is_stored(
    database: Database, name: str, media: bool
) -> None:
    client = app_client(database)
    signer = CASES[name][0]
    started = time.monotonic()
    answered: Counter[int] = Counter()

    @settings(
        max_examples=EXAMPLES[database.engine.dialect.name],
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=body_for(name, media), extra=header_overrides(name))
    def delivered(body: bytes, extra: dict[str, str]) -> None:
        signed = signer(body, SECRET, NOW_S)
        delivery = Delivery({**signed.headers, **extra}, body)
        before = count_events(database)
        answer = client.post(f"/v1/inbound/{name}", content=body, headers=delivery.headers)
        assert answer.status_code < 500, answer.text
        answered[answer.status_code] += 1
        if answer.status_code >= 400:
            assert set(answer.json()["error"]) == {"type", "message"}
            assert count_events(database) == before, "a refused delivery stored something"
            return
        ids = _expected_ids(client, name, delivery)
        assert ids or name in ("slack", "discord"), "a 2xx without an event"  # handshakes
        assert _stored(database, ids) == [], f"answered {answer.status_code} but not stored"

    delivered()
    took = time.monotonic() - started
    print(f"{name} on {database.engine.dialect.name}: {took:.1f} s, {dict(answered)}")


NESTED = b'{"update_id": 7, "message": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"


@pytest.mark.parametrize(
    ("name", "body", "status"),
    [
        ("telegram", NESTED, 400),
        ("telegram", json_bytes({"update_id": True, "message": {"text": "x"}}), 400),
        ("telegram", b'{"update_id": 8, "x": NaN}', 400),
        ("telegram", b'{"update_id": 9, "x": 1e400}', 400),
        ("telegram", b'{"update_id": ' + b"9" * 5_000 + b"}", 400),
    ],
    ids=["nested 50k deep", "update_id true", "NaN", "1e400", "5000-digit int"],
)
def test_named_hostile_json_is_a_clear_400(
    pg_database: Database, name: str, body: bytes, status: int
) -> None:
    client = app_client(pg_database)
    answer = client.post(
        f"/v1/inbound/{name}", content=body, headers=CASES[name][0](body, SECRET, NOW_S).headers
    )
    assert (answer.status_code, answer.json()["error"]["type"]) == (status, "malformed_request")
    assert count_events(pg_database) == 0


def test_odd_but_storable_fields_are_kept_on_postgres(pg_database: Database) -> None:
    """Long ids, a lone surrogate, NUL and out-of-range dates: accepted, stored bounded."""
    message = {
        "message_id": 10**300,
        "date": 10**20,
        "chat": {"id": "c" * 900, "type": "private"},
        "from": {"id": 2**70, "first_name": "Ada \ud800"},
        "text": "hi\x00there",
        "message_thread_id": "t" * 400,
        "is_topic_message": True,
    }
    body = json.dumps({"update_id": 10**400, "message": message}).encode()
    client = app_client(pg_database)
    answer = client.post(
        "/v1/inbound/telegram",
        content=body,
        headers=CASES["telegram"][0](body, SECRET, NOW_S).headers,
    )
    assert answer.status_code == 200, answer.text
    (accepted,) = answer.json()["accepted"]
    with pg_database.unit_of_work() as uow:
        row = uow.ledger.events.get(accepted["event_id"])
    assert row is not None and len(row.id) <= 255 and row.id.startswith("telegram:sha256:")
    assert row.occurred_at == 0 and row.text == "hi\ufffdthere"
    assert row.container_id is not None and len(row.container_id) == 255
    assert row.container_id.startswith("c" * 100)
    again = client.post(
        "/v1/inbound/telegram",
        content=body,
        headers=CASES["telegram"][0](body, SECRET, NOW_S).headers,
    )
    assert again.json()["accepted"][0] == {**accepted, "duplicate": True}
    assert count_events(pg_database) == 1
