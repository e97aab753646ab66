"""A message sent through the REST API (and so `nexus send`) goes past the hooks too."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.hooks.registry import register_directory
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}
WATCHER = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="watcher")
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state.setdefault("seen", []).append(ctx.event.text)
    return HookResult()
"""


def test_a_hook_sees_a_message_sent_through_the_api(database: Database, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "watcher.py").write_text(WATCHER)
    doorbell = RecordingDoorbell()
    graph = bootstrap(
        Settings(api_tokens="tok", hooks_dir=str(hooks)), database=database, doorbell=doorbell
    )
    register_directory(graph.fresh_hook_runner(on_problem=print), hooks, [], allow_empty=False)
    client = TestClient(create_app(graph))

    sent = client.post(
        "/v1/sessions/main/messages", json={"content": "file the invoice"}, headers=AUTH
    )
    assert sent.status_code == 202, sent.text
    event_id = sent.json()["event_id"]
    # Rung after the commit, for the hooks task (`nexus.event.hooks`) ...
    assert doorbell.hooks == [event_id]
    # ... which runs them on the stored message, as a worker does.
    [invocation] = graph.run_hooks(event_id)
    assert invocation.error is None
    with database.unit_of_work() as uow:
        watcher = uow.ledger.hooks.get("watcher")
        calls = uow.ledger.hooks.invocations_of("watcher")
    assert watcher is not None and watcher.state == {"seen": ["file the invoice"]}
    assert [call["event_id"] for call in calls] == [event_id]


def test_a_refused_message_rings_no_hooks(database: Database, tmp_path: Path) -> None:
    doorbell = RecordingDoorbell()
    graph = bootstrap(
        Settings(api_tokens="tok", hooks_dir=str(tmp_path)), database=database, doorbell=doorbell
    )
    client = TestClient(create_app(graph))
    refused = client.post("/v1/sessions/main/messages", json={"content": ""}, headers=AUTH)
    assert refused.status_code == 422
    assert doorbell.hooks == []
