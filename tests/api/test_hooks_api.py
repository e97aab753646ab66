"""/v1/hooks: the list with breaker state, enable/disable, and paged invocations."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.hooks.loader import load_hooks
from nexus.hooks.service import HookRunner
from nexus.ledger.records import EventDraft
from nexus.settings import Settings
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}

BROKEN_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="broken", description="always fails")
def evaluate(ctx: HookContext) -> HookResult:
    raise RuntimeError("bad day")
"""
CRON_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="every-minute", description="ticks", schedule="* * * * *")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult()
"""


def _client(database: Database) -> TestClient:
    return TestClient(
        create_app(
            bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
        )
    )


def _runner(database: Database, clock: FakeClock, tmp_path: Path) -> HookRunner:
    (tmp_path / "broken.py").write_text(BROKEN_HOOK)
    (tmp_path / "every_minute.py").write_text(CRON_HOOK)
    report = load_hooks(tmp_path)
    assert report.problems == ()
    runner = HookRunner(
        database=database, hooks=report.hooks, doorbell=RecordingDoorbell(), clock=clock
    )
    runner.sync()
    return runner


def _sync_one(database: Database, name: str) -> None:
    with database.unit_of_work() as uow:
        uow.ledger.hooks.sync([(name, f"/hooks/{name}.py", "", "persistent", None, "h")])
        uow.commit()


def test_hooks_are_listed_with_their_breakers(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = _runner(database, clock, tmp_path)
    for n in range(5):
        with database.unit_of_work() as uow:
            uow.ledger.events.insert(
                EventDraft(id=f"api:{n}", adapter="api", platform="api", text="x", occurred_at=0)
            )
            uow.commit()
        runner.run(f"api:{n}")
    body = _client(database).get("/v1/hooks", headers=AUTH).json()
    assert body == {
        "items": [
            {
                "name": "broken",
                "description": "always fails",
                "mode": "persistent",
                "schedule": None,
                "enabled": True,
                "breaker_state": "open",
                "consecutive_errors": 5,
                "last_fired_at": None,
            },
            {
                "name": "every-minute",
                "description": "ticks",
                "mode": "persistent",
                "schedule": "* * * * *",
                "enabled": True,
                "breaker_state": "closed",
                "consecutive_errors": 0,
                "last_fired_at": None,
            },
        ]
    }


def test_a_hook_is_disabled_and_enabled_and_sync_keeps_the_choice(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = _runner(database, clock, tmp_path)
    client = _client(database)
    off = client.post("/v1/hooks/broken/disable", headers=AUTH)
    assert off.status_code == 200
    assert (off.json()["name"], off.json()["enabled"]) == ("broken", False)
    runner.sync()  # a worker reloading the directory must not switch it back on
    listed = {
        h["name"]: h["enabled"] for h in client.get("/v1/hooks", headers=AUTH).json()["items"]
    }
    assert listed == {"broken": False, "every-minute": True}
    on = client.post("/v1/hooks/broken/enable", headers=AUTH)
    assert on.status_code == 200 and on.json()["enabled"] is True
    with database.unit_of_work() as uow:
        stored = uow.ledger.hooks.get("broken")
    assert stored is not None and stored.enabled is True


def test_invocations_are_paged_newest_first(database: Database, clock: FakeClock) -> None:
    _sync_one(database, "watcher")
    with database.unit_of_work() as uow:
        for n in range(5):
            # Two share a start time: the id breaks the tie, so none is skipped or repeated.
            started = clock.now + (n if n < 4 else 3)
            uow.ledger.hooks.record_invocation(
                "watcher",
                event_id=f"api:{n}",
                started_at=started,
                latency_ms=n,
                fired=n % 2 == 0,
                result={"n": n} if n % 2 == 0 else None,
                error=None,
            )
        uow.commit()
    client = _client(database)
    seen: list[str] = []
    url = "/v1/hooks/watcher/invocations?limit=2"
    while url:
        body = client.get(url, headers=AUTH).json()
        assert len(body["items"]) <= 2
        seen += [item["event_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        url = f"/v1/hooks/watcher/invocations?limit=2&cursor={cursor}" if cursor else ""
    assert sorted(seen[:2]) == ["api:3", "api:4"] and seen[2:] == ["api:2", "api:1", "api:0"]
    whole = client.get("/v1/hooks/watcher/invocations", headers=AUTH).json()
    assert whole["next_cursor"] is None
    assert [i["event_id"] for i in whole["items"]] == seen
    first = whole["items"][-1]
    assert first == {
        "id": first["id"],
        "event_id": "api:0",
        "started_at": clock.now,
        "latency_ms": 0,
        "fired": True,
        "result": {"n": 0},
        "error": None,
    }


def test_bad_cursors_and_limits_are_refused(database: Database) -> None:
    _sync_one(database, "watcher")
    client = _client(database)
    for cursor in ("***", "WyJhIiwiYiJd", "WzEsMl0"):  # junk, ["a","b"], [1,2]
        response = client.get(f"/v1/hooks/watcher/invocations?cursor={cursor}", headers=AUTH)
        assert response.status_code == 400, cursor
        assert response.json()["error"]["type"] == "invalid_cursor"
    assert client.get("/v1/hooks/watcher/invocations?limit=0", headers=AUTH).status_code == 422
    too_many = client.get("/v1/hooks/watcher/invocations?limit=500", headers=AUTH)
    assert too_many.status_code == 422 and too_many.json()["error"]["type"] == "invalid_request"


def test_unknown_hooks_are_404(database: Database) -> None:
    client = _client(database)
    calls = [
        client.post("/v1/hooks/ghost/enable", headers=AUTH),
        client.post("/v1/hooks/ghost/disable", headers=AUTH),
        client.get("/v1/hooks/ghost/invocations", headers=AUTH),
    ]
    for response in calls:
        assert response.status_code == 404
        assert response.json()["error"] == {"type": "not_found", "message": "no hook named 'ghost'"}
    assert client.get("/v1/hooks", headers=AUTH).json() == {"items": []}


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}], ids=["missing", "wrong"]
)
def test_every_route_needs_the_token(database: Database, headers: dict[str, str]) -> None:
    _sync_one(database, "watcher")
    client = _client(database)
    calls = [
        client.get("/v1/hooks", headers=headers),
        client.post("/v1/hooks/watcher/enable", headers=headers),
        client.post("/v1/hooks/watcher/disable", headers=headers),
        client.get("/v1/hooks/watcher/invocations", headers=headers),
    ]
    for response in calls:
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["type"] == "unauthorized" and error["message"]
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("watcher")
    assert hook is not None and hook.enabled is True
