"""GET /v1/usage and the usage figures of /metrics, from turns run through the real anthropic
SDK against the fake Messages API: priced at commit, to the micro-dollar."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.pricing import BUILTIN_PRICE_VERSION, parse_prices
from nexus.settings import Settings
from tests.contract.engine_support import build_rig, on_anthropic
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.support import FakeClock

HAIKU = "claude-haiku-4-5"
AUTH = {"Authorization": "Bearer tok"}
# Haiku per million tokens: $1 input, $5 output, $1.25 cache write, $0.10 cache read.
TURN_MICROS = 10_347  # 1,234 + 567 x 5 + 8,765 x 0.1 + 4,321 x 1.25 = 10,346.75, half-up
SUMMARY_MICROS = 2_750  # 2,000 + 150 x 5


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(model=HAIKU) as server:
        yield server


def _client(database: Database) -> TestClient:
    graph = bootstrap(
        Settings(api_tokens="tok", metrics_public=True),
        database=database,
        doorbell=RecordingDoorbell(),
    )
    return TestClient(create_app(graph))


def _turn_and_compaction(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> tuple[str, str]:
    rig = on_anthropic(build_rig(database, clock), fake.base_url, HAIKU)
    session = rig.session("dm:usage")
    fake.reply_text(
        "Hello.", input_tokens=1_234, output_tokens=567, cache_read=8_765, cache_write=4_321
    )
    turn = rig.say(session.id, "hi")
    assert turn.status == "committed"
    clock.advance(86_400_000)  # the compaction runs the next day
    fake.reply_text("The user said hi.", input_tokens=2_000, output_tokens=150)
    compaction = rig.say(session.id, "/compact")
    assert compaction.status == "committed" and compaction.compactions[0].fallback is False
    return turn.turn_id, compaction.turn_id


def test_a_turn_on_the_real_sdk_is_priced_at_commit_to_the_micro_dollar(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    turn_id, compaction_id = _turn_and_compaction(database, clock, fake)
    with database.engine.connect() as connection:
        rows: dict[str, int] = dict(
            connection.execute(
                text("SELECT id, cost_micros FROM turns WHERE price_version = :version"),
                {"version": BUILTIN_PRICE_VERSION},
            ).all()
        )
    assert rows == {turn_id: TURN_MICROS, compaction_id: SUMMARY_MICROS}

    client = _client(database)
    shown = client.get(f"/v1/turns/{turn_id}", headers=AUTH).json()["turn"]
    assert (shown["cost_micros"], shown["price_version"]) == (TURN_MICROS, BUILTIN_PRICE_VERSION)
    body = client.get("/v1/usage", headers=AUTH).json()
    assert body["totals"] == {
        "turns": 2,
        "tokens": {
            "input": 3_234,
            "output": 717,
            "cache_read": 8_765,
            "cache_write": 4_321,
            "total": 3_234 + 717 + 8_765 + 4_321,
        },
        "cost_micros": TURN_MICROS + SUMMARY_MICROS,
        "cost_usd": "0.013097",
        "unpriced_turns": 0,
        "unpriced_models": [],
    }
    assert [(d["day"], d["cost_usd"], d["turns"]) for d in body["days"]] == [
        ("2026-01-01", "0.010347", 1),
        ("2026-01-02", "0.002750", 1),
    ]
    assert [(m["model"], m["cost_micros"]) for m in body["models"]] == [(HAIKU, 13_097)]

    metrics = client.get("/metrics").text
    assert (
        'nexus_model_tokens_total{kind="cache_read",model="claude-haiku-4-5",persona="assistant"}'
        " 8765.0" in metrics
    )
    assert (
        'nexus_model_cost_usd_total{model="claude-haiku-4-5",persona="assistant"} 0.013097'
        in metrics
    )


def test_a_price_change_does_not_rewrite_history_and_overrides_price_new_turns(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    rig = on_anthropic(build_rig(database, clock), fake.base_url, HAIKU)
    session = rig.session("dm:usage")
    fake.reply_text("One.", input_tokens=1_000, output_tokens=100)
    rig.say(session.id, "one")  # 1,500 micro-dollars at the built-in price
    rig.turns.prices = parse_prices(
        "version: acme-1\nmodels: {claude-haiku-4: {input: 2, output: 10}}"
    )
    fake.reply_text("Two.", input_tokens=1_000, output_tokens=100)
    rig.say(session.id, "two")  # 3,000 at the override
    rig.turns.default_model = "claude-unknown-9"
    fake.reply_text("Three.", input_tokens=7, output_tokens=1)
    rig.say(session.id, "three")  # unpriced
    client = _client(database)
    body = client.get("/v1/usage", params={"session": "dm:usage"}, headers=AUTH).json()
    assert body["totals"]["cost_micros"] == 4_500 and body["totals"]["cost_usd"] == "0.004500"
    assert body["totals"]["unpriced_turns"] == 1
    assert body["totals"]["unpriced_models"] == ["claude-unknown-9"]
    unknown = next(m for m in body["models"] if m["model"] == "claude-unknown-9")
    assert unknown["cost_usd"] is None and unknown["tokens"]["input"] == 7
    metrics = client.get("/metrics").text
    assert (
        'nexus_model_unpriced_turns_total{model="claude-unknown-9",persona="assistant"} 1.0'
        in metrics
    )


def test_filters_by_persona_and_since_and_refuses_what_it_cannot_read(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    _turn_and_compaction(database, clock, fake)
    client = _client(database)

    def get(**params: str) -> dict[str, object]:
        answer = client.get("/v1/usage", params=params, headers=AUTH)
        assert answer.status_code == 200, answer.text
        found: dict[str, object] = answer.json()
        return found

    assert get(persona="assistant")["totals"] == get()["totals"]
    since = get(since="2026-01-02")
    assert since["since"] == "2026-01-02T00:00:00+00:00"
    assert since["totals"]["cost_micros"] == SUMMARY_MICROS  # type: ignore[index]
    assert get(since="2026-01-01T12:00:00+02:00")["totals"]["turns"] == 1  # type: ignore[index]
    assert get(since="2026-01-03")["totals"]["turns"] == 0  # type: ignore[index]

    for params, status in (
        ({"session": "dm:nobody"}, 404),
        ({"persona": "nobody"}, 404),
        ({"since": "last tuesday"}, 422),
        ({"since": "2026-13-01"}, 422),
    ):
        answer = client.get("/v1/usage", params=params, headers=AUTH)
        assert answer.status_code == status, (params, answer.text)
        assert answer.json()["error"]["message"]
    assert client.get("/v1/usage").status_code == 401
