"""POST /v1/hooks/sync and POST /v1/hooks/{name}/test: registration and dry runs happen in the
API process, over its own NEXUS_HOOKS_DIR."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}

GREETER = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="greeter", description="fires on hello")
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    return HookResult(fire=(ctx.event.text or "").startswith("hello"), prompt="greet them")
"""
BROKEN = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="broken", description="always fails")
def evaluate(ctx: HookContext) -> HookResult:
    raise RuntimeError("bad day")
"""


@pytest.fixture
def hooks_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "hooks"
    folder.mkdir()
    (folder / "greeter.py").write_text(GREETER)
    (folder / "broken.py").write_text(BROKEN)
    return folder


@pytest.fixture
def client(database: Database, hooks_dir: Path) -> Iterator[TestClient]:
    graph = bootstrap(
        Settings(api_tokens="tok", hooks_dir=str(hooks_dir)),
        database=database,
        doorbell=RecordingDoorbell(),
    )
    try:
        yield TestClient(create_app(graph))
    finally:
        graph.close()


def _registry(database: Database) -> dict[str, bool]:
    with database.unit_of_work() as uow:
        return {hook.name: hook.enabled for hook in uow.ledger.hooks.all()}


def test_sync_registers_the_api_hooks_directory_and_disables_what_is_gone(
    client: TestClient, database: Database, hooks_dir: Path
) -> None:
    synced = client.post("/v1/hooks/sync", headers=AUTH)
    assert synced.status_code == 200, synced.text
    assert synced.json() == {"registered": ["broken", "greeter"], "disabled": [], "problems": []}
    assert _registry(database) == {"broken": True, "greeter": True}

    (hooks_dir / "broken.py").unlink()
    again = client.post("/v1/hooks/sync", headers=AUTH).json()
    assert again == {"registered": ["greeter"], "disabled": ["broken"], "problems": []}
    assert _registry(database) == {"broken": False, "greeter": True}


def test_a_refused_sync_is_409_and_changes_nothing(
    client: TestClient, database: Database, hooks_dir: Path
) -> None:
    assert client.post("/v1/hooks/sync", headers=AUTH).status_code == 200
    (hooks_dir / "typo.py").write_text("this is not python")
    refused = client.post("/v1/hooks/sync", headers=AUTH)
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "registration_refused"
    assert "typo.py" in refused.json()["error"]["message"]

    (hooks_dir / "typo.py").unlink()
    (hooks_dir / "greeter.py").unlink()
    (hooks_dir / "broken.py").unlink()
    empty = client.post("/v1/hooks/sync", headers=AUTH)
    assert empty.status_code == 409 and "no hooks" in empty.json()["error"]["message"]
    assert _registry(database) == {"broken": True, "greeter": True}

    emptied = client.post("/v1/hooks/sync", params={"allow_empty": "true"}, headers=AUTH)
    assert emptied.status_code == 200
    assert emptied.json() == {"registered": [], "disabled": ["broken", "greeter"], "problems": []}
    assert _registry(database) == {"broken": False, "greeter": False}


def test_sync_is_refused_when_the_api_has_no_hooks_directory(
    database: Database, tmp_path: Path
) -> None:
    graph = bootstrap(
        Settings(api_tokens="tok", hooks_dir=str(tmp_path / "nowhere")),
        database=database,
        doorbell=RecordingDoorbell(),
    )
    try:
        refused = TestClient(create_app(graph)).post(
            "/v1/hooks/sync", params={"allow_empty": "true"}, headers=AUTH
        )
    finally:
        graph.close()
    assert refused.status_code == 409 and "nowhere" in refused.json()["error"]["message"]
    assert _registry(database) == {}


def test_sync_needs_a_token(client: TestClient, database: Database) -> None:
    assert client.post("/v1/hooks/sync").status_code == 401
    assert _registry(database) == {}


def test_a_dry_run_says_whether_the_hook_fires_and_writes_nothing(
    client: TestClient, database: Database
) -> None:
    fired = client.post("/v1/hooks/greeter/test", json={"text": "hello there"}, headers=AUTH)
    assert fired.status_code == 200, fired.text
    body = fired.json()
    assert (body["hook"], body["fired"], body["error"]) == ("greeter", True, None)
    assert body["result"]["fire"] is True and body["result"]["prompt"] == "greet them"
    assert body["state_after"] == {"seen": 1}
    assert isinstance(body["latency_ms"], int)

    quiet = client.post("/v1/hooks/greeter/test", json={"text": "bye"}, headers=AUTH).json()
    assert (quiet["fired"], quiet["state_after"]) == (False, {"seen": 1})  # nothing was kept
    with database.unit_of_work() as uow:
        assert uow.ledger.hooks.all() == []  # not even registered by a dry run
        assert uow.ledger.events.get("dry-run:1") is None


def test_a_dry_run_reports_the_hooks_error(client: TestClient) -> None:
    failed = client.post("/v1/hooks/broken/test", json={}, headers=AUTH)
    assert failed.status_code == 200
    assert failed.json()["fired"] is False and "bad day" in failed.json()["error"]


def test_a_dry_run_of_an_unknown_hook_is_404(client: TestClient) -> None:
    missing = client.post("/v1/hooks/nobody/test", json={}, headers=AUTH)
    assert missing.status_code == 404
    assert "nobody" in missing.json()["error"]["message"]
    assert "greeter" in missing.json()["error"]["message"]  # what is loaded, to help


def test_a_dry_run_of_a_hook_whose_file_does_not_load_says_why(
    client: TestClient, hooks_dir: Path
) -> None:
    (hooks_dir / "typo.py").write_text("this is not python")
    missing = client.post("/v1/hooks/typo/test", json={}, headers=AUTH)
    assert missing.status_code == 404
    assert "typo.py" in missing.json()["error"]["message"]


@pytest.mark.parametrize(
    "event",
    [{"occurred_at": "yesterday"}, {"colour": "blue"}, ["not", "an", "object"]],
    ids=["bad-field", "unknown-field", "not-an-object"],
)
def test_a_dry_run_of_a_bad_event_is_422(client: TestClient, event: object) -> None:
    bad = client.post("/v1/hooks/greeter/test", json=event, headers=AUTH)
    assert bad.status_code == 422
    assert bad.json()["error"]["type"] == "invalid_request"
