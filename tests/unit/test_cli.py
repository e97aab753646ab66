"""The `nexus` CLI: migrations and doctor, against real SQLite, Postgres and Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect
from typer.testing import CliRunner

from nexus.cli import app as cli
from nexus.cli import configuration
from nexus.cli.app import app
from nexus.db.database import build_engine
from nexus.db.migrate import head_revision
from nexus.settings import get_settings
from tests.services import REDIS_URL, with_driver
from tests.support import served_app, serving_cli

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in (
        "NEXUS_DATABASE_URL",
        "NEXUS_REDIS_URL",
        "NEXUS_BROKER_URL",
        "NEXUS_MODEL",
        "ANTHROPIC_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _doctor(*args: str) -> tuple[int, list[dict[str, str]]]:
    get_settings.cache_clear()  # each test changes the environment between invocations
    result = runner.invoke(app, ["doctor", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def _by_name(checks: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {check["name"]: check for check in checks}


def test_db_upgrade_builds_the_embedded_ledger(tmp_path: Path) -> None:
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert f"revision {head_revision()}" in result.output
    engine = build_engine(f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}")
    try:
        assert {"sessions", "turns", "queue_items"} <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    # Running it again is harmless.
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0


def test_doctor_names_missing_migrations_and_the_fix() -> None:
    code, checks = _doctor()
    assert code == 1
    migrations = _by_name(checks)["migrations"]
    assert migrations["status"] == "fail"
    assert migrations["fix"] == "run: nexus db upgrade"
    runner.invoke(app, ["db", "upgrade"])
    code, checks = _doctor()
    assert code == 0
    assert {c["status"] for c in checks} == {"ok"}
    assert "scripted" in _by_name(checks)["model"]["detail"]


def test_doctor_is_green_on_real_postgres_and_redis(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setenv("NEXUS_DATABASE_URL", postgres_url)
    monkeypatch.setenv("NEXUS_REDIS_URL", REDIS_URL)
    code, checks = _doctor()
    assert code == 0, checks
    named = _by_name(checks)
    assert named["database"]["status"] == named["redis"]["status"] == "ok"
    assert named["broker"]["detail"] == "Celery uses the Redis above"


def test_doctor_reports_an_unreachable_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    runner.invoke(app, ["db", "upgrade"])
    monkeypatch.setenv("NEXUS_REDIS_URL", "redis://127.0.0.1:1/0")
    code, checks = _doctor()
    assert code == 1
    redis_check = _by_name(checks)["redis"]
    assert redis_check["status"] == "fail"
    assert "NEXUS_REDIS_URL" in redis_check["fix"]


def test_doctor_reports_an_unreachable_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    code, checks = _doctor()
    assert code == 1
    assert _by_name(checks)["database"]["status"] == "fail"


def test_a_missing_database_driver_names_the_extra_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)  # as if it were not installed
    url = with_driver(postgres_url, "postgres-psycopg2")
    monkeypatch.setenv("NEXUS_DATABASE_URL", url)
    code, checks = _doctor()
    assert code == 1
    database = _by_name(checks)["database"]
    assert database["status"] == "fail"
    assert "psycopg2" in database["detail"]
    assert "nexus-broker[psycopg2]" in (database["fix"] or "")
    monkeypatch.setattr(cli.console, "width", 400)  # one line per row, to read the table
    table = runner.invoke(app, ["doctor"])
    assert table.exit_code == 1
    assert "nexus-broker[psycopg2]" in table.output  # printed as text, not taken for markup
    monkeypatch.setattr(configuration.errors, "width", 400)
    upgrade = runner.invoke(app, ["db", "upgrade"])
    assert upgrade.exit_code == 1
    assert "nexus-broker[psycopg2]" in upgrade.output


def test_doctor_wants_a_key_for_a_claude_model(monkeypatch: pytest.MonkeyPatch) -> None:
    runner.invoke(app, ["db", "upgrade"])
    monkeypatch.setenv("NEXUS_MODEL", "claude-sonnet-4-5")
    code, checks = _doctor()
    assert code == 1
    assert "ANTHROPIC_API_KEY" in _by_name(checks)["model"]["detail"]


def test_doctor_checks_the_sandbox_and_only_warns_without_bubblewrap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runner.invoke(app, ["db", "upgrade"])
    _, checks = _doctor()
    sandbox = _by_name(checks)["sandbox"]
    assert sandbox["status"] == "ok" and "bubblewrap jail" in sandbox["detail"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    code, checks = _doctor()
    assert code == 0  # run_python is optional: a warning, not a failure
    sandbox = _by_name(checks)["sandbox"]
    assert sandbox["status"] == "warn" and "run_python is refused" in sandbox["detail"]
    assert sandbox["fix"].startswith("apt-get install bubblewrap")
    broken = tmp_path / "bwrap"  # as where user namespaces are not allowed
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    code, checks = _doctor()
    sandbox = _by_name(checks)["sandbox"]
    assert code == 0 and sandbox["status"] == "warn"
    assert sandbox["detail"].endswith("No permissions to creating new namespace")
    assert "user namespaces" in sandbox["fix"]


def test_bad_configuration_exits_2_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_DATABASE_URL", "just-a-file.db")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 2
    assert "NEXUS_DATABASE_URL" in result.output


def test_the_installed_entry_point_runs() -> None:
    nexus = Path(sys.executable).with_name("nexus")
    completed = subprocess.run(
        [str(nexus), "version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "0.1.0"


def test_merge_goes_through_the_server_which_rings_the_primary_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nexus merge` asks the running Nexus, so the merge notice is rung by the server's
    own doorbell at once (in `nexus dev`, the embedded worker's broker), not found by the
    relay a timer tick later."""
    from nexus.access.policy import load_policies
    from nexus.api.app import create_app
    from nexus.bootstrap import bootstrap
    from nexus.db import Database
    from nexus.doorbell import RecordingDoorbell
    from nexus.event import Author, Container, NexusEvent
    from nexus.ingest.service import ingest
    from nexus.settings import Settings
    from tests.support import route_one

    runner.invoke(app, ["db", "upgrade"])
    database = Database(f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}")
    with database.unit_of_work() as uow:
        for sender in ("+1", "+2"):
            event = NexusEvent(id=f"sms:{sender}", adapter="sms", platform="sms",
                               sender=Author(id=sender), container=Container(kind="dm", id=sender),
                               text="hi", occurred_at=0)  # fmt: skip
            ingest(uow, [event], RecordingDoorbell())
            route_one(uow, event.id, load_policies(None), RecordingDoorbell())
        first = uow.ledger.identity.contact_entity("sms", "+1")
        second = uow.ledger.identity.contact_entity("sms", "+2")
        uow.commit()
    assert first is not None and second is not None
    rung = RecordingDoorbell()
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=rung)
    try:
        with served_app(create_app(graph)) as url:
            monkeypatch.setenv("NEXUS_API_URL", url)
            monkeypatch.setenv("NEXUS_API_TOKEN", "tok")
            get_settings.cache_clear()
            result = runner.invoke(app, ["merge", second, "--into", first])
            assert result.exit_code == 0, result.output
            # Neither session has turns, so the tie goes to the latest activity: the second's.
            assert f"primary session: dm:{second}" in result.output
            assert f"alias dm:{first} -> dm:{second}" in result.output
            with database.unit_of_work() as uow:
                primary = uow.ledger.sessions.get_by_label(f"dm:{second}")
                assert primary is not None
                [notice] = [
                    item
                    for item in uow.ledger.queue.for_session(primary.id)
                    if item.payload.get("kind") == "identity_merge"
                ]
            assert rung.sessions == [primary.id]  # the server rang it, at once
            assert notice.status.value == "queued"
            refused = runner.invoke(app, ["merge", second, "--into", first])
            assert refused.exit_code == 1
            assert "already the same person" in refused.output
    finally:
        database.close()


GREETER_HOOK = (
    "from nexus.hooks.spec import HookMeta, HookResult\n"
    'HOOK = HookMeta(name="greeter")\n'
    "def evaluate(ctx):\n"
    '    return HookResult(fire=ctx.event.text == "hello")\n'
)
FAILING_HOOK = (
    "from nexus.hooks.spec import HookMeta\n"
    'HOOK = HookMeta(name="failing")\n'
    "def evaluate(ctx):\n"
    '    raise RuntimeError("bad day")\n'
)


def _no_ledger_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shell's own ledger settings point at nothing: the command must ask the API."""
    monkeypatch.setenv("NEXUS_DATABASE_URL", f"sqlite:///{tmp_path}/missing/none.db")
    get_settings.cache_clear()


def test_hooks_sync_asks_the_api_which_refuses_to_empty_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = tmp_path / "hooks"  # the served API's NEXUS_HOOKS_DIR (./hooks where it runs)
    hooks.mkdir()
    (hooks / "greeter.py").write_text(GREETER_HOOK)
    with serving_cli(tmp_path, monkeypatch):
        _no_ledger_here(tmp_path, monkeypatch)
        synced = runner.invoke(app, ["hooks", "sync"])
        assert synced.exit_code == 0, synced.output
        assert "registered 1 hook(s)" in synced.output and "greeter" in synced.output

        (hooks / "typo.py").write_text("this is not python")
        refused = runner.invoke(app, ["hooks", "sync"])
        assert refused.exit_code == 2
        assert "nothing changed" in refused.output and "typo.py" in refused.output
        listed = runner.invoke(app, ["hooks", "--json"])
        assert [(h["name"], h["enabled"]) for h in json.loads(listed.stdout)] == [("greeter", True)]

        (hooks / "typo.py").unlink()
        (hooks / "greeter.py").unlink()
        assert runner.invoke(app, ["hooks", "sync"]).exit_code == 2
        emptied = runner.invoke(app, ["hooks", "sync", "--allow-empty"])
        assert emptied.exit_code == 0 and "greeter: disabled" in emptied.output


def test_hooks_test_posts_the_event_file_to_the_api_for_a_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "greeter.py").write_text(GREETER_HOOK)
    (hooks / "failing.py").write_text(FAILING_HOOK)
    hello, bye = tmp_path / "hello.json", tmp_path / "bye.json"
    hello.write_text(json.dumps({"text": "hello"}))
    bye.write_text(json.dumps({"text": "bye"}))
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "bad.json").write_text(json.dumps({"occurred_at": "yesterday"}))
    with serving_cli(tmp_path, monkeypatch) as graph:
        _no_ledger_here(tmp_path, monkeypatch)
        fired = runner.invoke(app, ["hooks", "test", "greeter", str(hello)])
        assert fired.exit_code == 0, fired.output
        decided = json.loads(fired.stdout)
        assert (decided["hook"], decided["fired"], decided["error"]) == ("greeter", True, None)
        quiet = runner.invoke(app, ["hooks", "test", "greeter", str(bye)])
        assert quiet.exit_code == 0 and json.loads(quiet.stdout)["fired"] is False

        failed = runner.invoke(app, ["hooks", "test", "failing", str(hello)])
        assert failed.exit_code == 1 and "bad day" in failed.stdout
        unknown = runner.invoke(app, ["hooks", "test", "nobody", str(hello)])
        assert unknown.exit_code == 1 and "nobody" in unknown.output
        for unreadable in ("missing.json", "list.json", "bad.json"):
            result = runner.invoke(app, ["hooks", "test", "greeter", str(tmp_path / unreadable)])
            assert result.exit_code == 2, (unreadable, result.output)
        with graph.database.unit_of_work() as uow:
            assert uow.ledger.hooks.all() == []  # a dry run registers and records nothing


@pytest.mark.parametrize(
    ("host", "port", "reached"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
        ("127.0.0.1", 9123, "http://127.0.0.1:9123"),
        ("0.0.0.0", 9124, "http://127.0.0.1:9124"),  # listening everywhere, reached on loopback
    ],
    ids=["default", "other-port", "all-interfaces"],
)
def test_the_dev_banner_commands_reach_the_server_it_started(
    monkeypatch: pytest.MonkeyPatch, host: str, port: int, reached: str
) -> None:
    """The `nexus send` line the banner suggests, typed as printed into a shell with no
    Nexus settings, talks to the API that `nexus dev --host/--port` serves."""
    import shlex

    from nexus.cli.dev import banner
    from nexus.settings import Settings

    monkeypatch.delenv("NEXUS_API_URL", raising=False)
    lines = [line.strip() for line in banner(Settings(), host=host, port=port)]
    commands = [shlex.split(line) for line in lines if "nexus send" in line]
    assert commands
    for words in commands:
        assignments = dict(w.split("=", 1) for w in words[: words.index("nexus")])
        with monkeypatch.context() as shell:
            for name, value in assignments.items():
                shell.setenv(name, value)
            assert Settings().api_url.rstrip("/") == reached, words
    [curl] = [line for line in lines if line.startswith("curl")]
    assert f"{reached}/v1/sessions/main/stream" in curl


def test_compact_asks_the_server_whose_runner_compacts_with_the_servers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nexus compact` queues through the API; the server's own session runner and model
    carry it out. The shell's ledger and model settings are never used (here they point
    at nothing that exists)."""
    from nexus.api.app import create_app
    from nexus.bootstrap import bootstrap
    from nexus.db import Database
    from nexus.db.migrate import upgrade
    from nexus.queueing.coordination import InProcessCoordination
    from nexus.sessions.runner import SessionRunner
    from nexus.settings import Settings
    from tests.contract.engine_support import build_rig
    from tests.support import FakeClock, RunOnRing

    url = f"sqlite:///{tmp_path / 'server.db'}"
    upgrade(url)
    clock = FakeClock()
    database = Database(url, clock=clock)
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_compact")
    rig.say(session.id, "the invoice is due Friday")
    ring = RunOnRing()
    ring.runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=InProcessCoordination(),
        doorbell=ring,
        clock=clock,
    )
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=ring)
    try:
        with served_app(create_app(graph)) as served:
            monkeypatch.setenv("NEXUS_API_URL", served)
            monkeypatch.setenv("NEXUS_API_TOKEN", "tok")
            monkeypatch.setenv("NEXUS_DATABASE_URL", f"sqlite:///{tmp_path}/missing/none.db")
            monkeypatch.setenv("NEXUS_MODEL", "claude-from-the-shell")
            get_settings.cache_clear()
            result = runner.invoke(app, ["compact", "dm:ent_compact", "keep dates"])
        assert result.exit_code == 0, result.output
        assert ring.reports == ["done"]  # the server's runner took it when rung
        with database.unit_of_work() as uow:
            head = uow.ledger.sessions.get(session.id)
            assert head is not None and head.thread_id is not None
            view = uow.ledger.threads.get_turn(head.thread_id)
        assert view is not None and view.turn.turn_type == "compaction"
        assert f"compacted into {view.turn.id}" in result.output
        assert view.turn.model == "scripted"  # the server's model, not the shell's
        assert "keep dates" in rig.model.requests[-1].system_text
        assert not (tmp_path / "missing").exists()
    finally:
        database.close()


def test_doctor_reads_the_secrets_file_and_says_what_is_wrong_without_quoting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ghp_canary_2f1e"
    good = tmp_path / "secrets.yaml"
    good.write_text(f"github: {secret}\nsmtp: pass-1234\n")
    monkeypatch.setenv("NEXUS_SECRETS_FILE", str(good))
    _, checks = _doctor()
    found = _by_name(checks)["secrets"]
    assert found["status"] == "ok" and "2 credentials" in found["detail"]
    bad = tmp_path / "secrets.toml"
    bad.write_text(f'github = "{secret}"\nsmtp = {secret}\n')
    monkeypatch.setenv("NEXUS_SECRETS_FILE", str(bad))
    code, checks = _doctor()
    found = _by_name(checks)["secrets"]
    assert code != 0 and found["status"] == "fail"
    assert "not valid TOML (line 2)" in found["detail"] and secret not in json.dumps(checks)
    monkeypatch.setenv("NEXUS_SECRETS_FILE", str(tmp_path / "missing.json"))
    assert "cannot be read" in _by_name(_doctor()[1])["secrets"]["detail"]
