"""`nexus status`, `nexus dead-letters`, `nexus send --wait` streaming and `nexus --version`,
each against a real server on the embedded ledger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.bootstrap import Nexus
from nexus.cli.app import app
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.settings import get_settings
from nexus.timer.tick import tick
from tests.support import RunOnRing, serving_cli

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("NEXUS_DATABASE_URL", "NEXUS_REDIS_URL", "NEXUS_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


class Workers:
    """The worker ping's in-process twin: the workers that answer, as a test sets them."""

    def __init__(self) -> None:
        self.alive: list[str] = []
        self.asked: list[float] = []

    def __call__(self, timeout_s: float) -> list[str]:
        self.asked.append(timeout_s)
        return list(self.alive)


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _dead_letter(server: Nexus, label: str, text: str) -> str:
    """Send `text` to `label` and dead-letter its item, as a run out of attempts does."""
    sent = json.loads(_run("send", label, text, "--json"))
    with server.database.unit_of_work() as uow:
        assert uow.ledger.queue.dispose(
            [sent["queue_item_id"]],
            status=QueueStatus.DEAD,
            disposition=Disposition.DEAD_LETTERED,
            detail="after 3 attempts: overloaded_error: the model is busy",
        )
        uow.commit()
    return str(sent["queue_item_id"])


def test_status_fails_until_a_worker_answers_and_the_timer_ticks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = Workers()
    with serving_cli(tmp_path, monkeypatch, worker_ping=workers) as server:
        _run("send", "busy", "one")
        _run("send", "busy", "two")
        failing = runner.invoke(app, ["status"])
        assert failing.exit_code == 1
        assert "no worker answered a ping" in failing.output
        assert "the timer never ticked" in failing.output
        workers.alive = ["celery@w1"]
        with server.database.unit_of_work() as uow:
            tick(uow, server.doorbell, now_ms=uow.ledger.clock())
            uow.commit()
        found = json.loads(_run("status", "--json"))
        assert found["ok"] is True and found["problems"] == []
        assert found["workers"] == ["celery@w1"]
        assert found["beat"]["age_ms"] is not None and found["beat"]["age_ms"] < 60_000
        assert (found["queues"]["queued"], found["queues"]["sessions"]) == (2, 1)
        [deepest] = found["queues"]["deepest"]
        assert (deepest["session"], deepest["queued"]) == ("busy", 2)
        assert found["redis_maxmemory_policy"] is None  # embedded: no Redis
        shown = _run("status")
        assert "workers: celery@w1" in shown and "busy: 2 queued" in shown and "ok" in shown
        assert workers.asked and all(timeout <= 2 for timeout in workers.asked)


def test_dead_letters_are_listed_shown_and_replayed_into_a_later_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving_cli(tmp_path, monkeypatch) as server:
        assert _run("dead-letters") == "no dead letters\n"
        dead_id = _dead_letter(server, "support", "where is my order?")
        [listed] = json.loads(_run("dead-letters", "--json"))
        assert (listed["id"], listed["session"], listed["replayed_as"]) == (
            dead_id,
            "support",
            None,
        )
        assert listed["text"] == "where is my order?" and "overloaded" in listed["detail"]
        shown = _run("dead-letters", "show", dead_id)
        assert "where is my order?" in shown and "replayed as: not replayed" in shown
        session_id = json.loads(_run("session", "support", "--json"))["id"]
        rung_before = list(server.doorbell.sessions)  # type: ignore[attr-defined]

        replayed = json.loads(_run("dead-letters", "replay", dead_id, "--json"))
        assert replayed["created"] is True and replayed["session"] == "support"
        new_id = replayed["queue_item_id"]
        # The session's doorbell rang after the commit, for the new item.
        assert server.doorbell.sessions == [*rung_before, session_id]  # type: ignore[attr-defined]
        again = _run("dead-letters", "replay", dead_id)
        assert f"was replayed already, as {new_id}" in again
        [listed] = json.loads(_run("dead-letters", "--json"))
        assert listed["replayed_as"] == new_id
        items = {i["id"]: i for i in json.loads(_run("queue", "support", "--json"))}
        # The dead item keeps its record; its replay waits in line, saying what it replays.
        assert (items[dead_id]["status"], items[dead_id]["disposition"]) == (
            "dead",
            "dead_lettered",
        )
        assert items[new_id]["status"] == "queued"
        assert items[new_id]["payload"]["replay_of"] == dead_id

        # A later turn answers it, with the original message as its query.
        assert server.session_runner.run(session_id).turns == 1
        with server.database.unit_of_work() as uow:
            item = uow.ledger.queue.get(new_id)
            assert item is not None and item.consumed_by_turn_id is not None
            turn = uow.ledger.threads.get_turn(item.consumed_by_turn_id)
        assert turn is not None
        assert turn.messages[0].content["text"] == "where is my order?"
        answer = _run("turn", item.consumed_by_turn_id)
        assert "You said: where is my order?" in answer


def test_replaying_an_archived_sessions_dead_letter_is_refused_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving_cli(tmp_path, monkeypatch) as server:
        dead_id = _dead_letter(server, "old", "hello?")
        _run("archive", "old")
        refused = runner.invoke(app, ["dead-letters", "replay", dead_id])
        assert refused.exit_code == 1
        assert "409" in refused.output and "archived" in refused.output
        assert len(json.loads(_run("queue", "old", "--json"))) == 1  # nothing was queued
        missing = runner.invoke(app, ["dead-letters", "replay", "01NOTDEAD"])
        assert missing.exit_code == 1 and "404" in missing.output


def test_send_wait_streams_the_answer_of_the_turn_that_took_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nexus.cli import remote

    def no_polling(*_: object) -> None:
        raise AssertionError("--wait polled the queue instead of reading the stream")

    monkeypatch.setattr(remote, "_wait_for_answer", no_polling)
    doorbell = RunOnRing()  # a worker that runs the session as soon as it is rung
    with serving_cli(tmp_path, monkeypatch, doorbell=doorbell) as server:
        doorbell.runner = server.session_runner
        # A new session (no stream yet) and then an existing one (the stream opened first).
        for text in ("hello", "and again"):
            answered = runner.invoke(app, ["send", "chat", text, "--wait"])
            assert answered.exit_code == 0, answered.output
            assert f"You said: {text}" in answered.output
        printed = _run("send", "chat", "once more", "--wait", "--json")
        # (The turn runs in this process, whose log lines share stdout with the answer.)
        as_json = json.loads(printed[printed.index("{\n") :])
        assert "You said: once more" in as_json["text"]
        tree = json.loads(_run("tree", "chat", "--json"))
        assert tree["turns"][-1]["id"] == as_json["turn_id"]


def test_version_comes_from_the_installed_package() -> None:
    assert _run("--version").strip() == version("nexus-broker")
    assert _run("version").strip() == version("nexus-broker")
