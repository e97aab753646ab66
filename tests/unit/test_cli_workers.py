"""`nexus workers SESSION [--cancel WORKER] [--json]` against a real server (SQLite)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.cli.app import app
from nexus.db import Database
from nexus.ledger.enums import QueueMode, SessionOrigin
from nexus.ledger.records import EventDraft, NewQueueItem, NewSession
from tests.support import serving_cli

runner = CliRunner()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph.database


def _office(database: Database) -> None:
    """A manager `boss` with workers `worker:a` (one task waiting) and `worker:b`, and a
    session `other` that is nobody's worker."""
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        for label in ("boss", "other"):
            uow.ledger.sessions.create(NewSession(label=label, persona_id=persona.id))
        for label, task in (("worker:a", "price the flights"), ("worker:b", "price the hotels")):
            worker = uow.ledger.sessions.create(
                NewSession(
                    label=label,
                    persona_id=persona.id,
                    origin=SessionOrigin.SUBAGENT,
                    parent_session_label="boss",
                    task_description=task,
                )
            )
        uow.ledger.events.insert(
            EventDraft(id="agent:task", adapter="agent", platform="agent", text="go", occurred_at=0)
        )
        uow.ledger.queue.enqueue(
            NewQueueItem(session_id=worker.id, event_id="agent:task", mode=QueueMode.FOLLOWUP)
        )
        uow.commit()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_workers_lists_a_managers_workers_and_cancels_one(server: Database) -> None:
    _office(server)
    table = _run("workers", "boss")
    for shown in ("worker:a", "worker:b", "price the flights", "pending"):
        assert shown in table
    listed = json.loads(_run("workers", "boss", "--json"))
    assert [(w["label"], w["task_status"], w["turns"]) for w in listed] == [
        ("worker:a", "pending", 0),
        ("worker:b", "pending", 0),
    ]
    cancelled = _run("workers", "boss", "--cancel", "worker:b")
    assert " ".join(cancelled.split()) == (
        "cancelled worker:b: 1 waiting item(s) dropped; a turn it was running, if any, "
        "is asked to stop"
    )
    assert _run("workers", "boss", "--cancel", "worker:b") == "worker:b was cancelled already\n"
    after = json.loads(_run("workers", "boss", "--json"))
    assert [w["task_status"] for w in after] == ["pending", "cancelled"]
    refused = runner.invoke(app, ["send", "worker:b", "more"])
    assert refused.exit_code == 1 and "was cancelled" in refused.output


def test_workers_refuses_unknown_sessions_and_other_sessions_workers(server: Database) -> None:
    _office(server)
    assert _run("workers", "other") == "other has dispatched no workers\n"
    missing = runner.invoke(app, ["workers", "nobody"])
    assert missing.exit_code == 1 and "no session labelled 'nobody'" in missing.output
    stranger = runner.invoke(app, ["workers", "other", "--cancel", "worker:a"])
    assert stranger.exit_code == 1 and "worker:a is not a worker of other" in stranger.output
    not_worker = runner.invoke(app, ["workers", "boss", "--cancel", "other"])
    assert not_worker.exit_code == 1 and "other is not a worker of boss" in not_worker.output
    assert [w["task_status"] for w in json.loads(_run("workers", "boss", "--json"))] == [
        "pending",
        "pending",
    ]
