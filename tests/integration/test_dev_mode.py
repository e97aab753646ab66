"""`nexus dev` as a user meets it: a subprocess in a fresh directory, then the CLI against it;
and the README's run command, followed literally in a fresh copy of the tree."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.api.test_hooks_see_api_messages import WATCHER
from tests.integration.worker_process import stop
from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]
NEXUS = Path(sys.prefix) / "bin" / "nexus"
pytestmark = pytest.mark.slow


def _clean_environment(port: int) -> dict[str, str]:
    """A user's shell: none of the test run's Nexus settings, the CLI pointed at the port."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))}
    return {**keep, "NEXUS_API_URL": f"http://127.0.0.1:{port}", "NO_COLOR": "1"}


@contextmanager
def _running(command: list[str], cwd: Path, environment: dict[str, str]) -> Iterator[Path]:
    log = cwd / "nexus-dev.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 180  # the README's command may install first
            while "is running at" not in log.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"nexus dev did not start:\n{log.read_text()}")
                time.sleep(0.2)
            yield log
        finally:
            stop(process)


def _nexus(cwd: Path, environment: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(NEXUS), *args], cwd=cwd, env=environment, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"nexus {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def _hook_saw(cwd: Path, environment: dict[str, str], name: str) -> list[str] | None:
    """The messages the enabled hook `name` was evaluated on, without error (None: no such
    hook is enabled); the listing comes through `nexus hooks`, the evaluations from the API."""
    listed = json.loads(_nexus(cwd, environment, "hooks", "--json"))
    if not [hook for hook in listed if hook["name"] == name and hook["enabled"]]:
        return None
    url = f"{environment['NEXUS_API_URL']}/v1/hooks/{name}/invocations"
    found = httpx.get(url, timeout=10).json()["items"]
    return [
        i["event_id"]
        for i in found
        if i["error"] is None and not str(i["event_id"]).startswith("timer:")
    ]


def test_nexus_dev_answers_and_the_cli_works_against_it(tmp_path: Path) -> None:
    port = free_port()
    environment = _clean_environment(port)
    (tmp_path / "hooks").mkdir()  # `nexus dev` registers its own hooks directory
    (tmp_path / "hooks" / "watcher.py").write_text(WATCHER)
    with _running([str(NEXUS), "dev", "--port", str(port)], tmp_path, environment) as log:
        assert f"http://127.0.0.1:{port}" in log.read_text()
        assert f"http://127.0.0.1:{port}/ui" in log.read_text()  # the console, named
        console = httpx.get(f"http://127.0.0.1:{port}/ui", timeout=10)
        assert console.status_code == 200 and "console.js" in console.text
        assert _hook_saw(tmp_path, environment, "watcher") == []
        answer = _nexus(tmp_path, environment, "send", "main", "hello", "--wait")
        assert "You said: hello" in answer and "scripted model" in answer
        # The message came in through the API; the hooks saw it all the same.
        deadline = time.monotonic() + 30
        while len(_hook_saw(tmp_path, environment, "watcher") or []) != 1:
            assert time.monotonic() < deadline, _hook_saw(tmp_path, environment, "watcher")
            time.sleep(0.2)
        _the_live_stream_carries_a_turn(tmp_path, environment)
        tree = json.loads(_nexus(tmp_path, environment, "tree", "main", "--json"))
        first = tree["turns"][0]["id"]
        assert "forked alt" in _nexus(tmp_path, environment, "fork", first, "--label", "alt")
        _nexus(tmp_path, environment, "send", "alt", "and on the branch?", "--wait")
        # Queued through the API and carried out by the session's runner, in order.
        assert "compacted into" in _nexus(tmp_path, environment, "compact", "main", "keep names")
        assert "nothing to compact" in _nexus(tmp_path, environment, "compact", "main")
        shown = _nexus(tmp_path, environment, "tree", "main")
        assert "compaction" in shown and "fork alt" in shown
        listed = json.loads(_nexus(tmp_path, environment, "sessions", "--json"))
        assert {s["label"] for s in listed["items"]} == {"main", "alt"}
        _merge_is_answered_without_waiting_for_the_tick(tmp_path, environment)
    assert (tmp_path / ".nexus" / "nexus.db").exists()  # the ledger lives where it ran


def _the_live_stream_carries_a_turn(cwd: Path, environment: dict[str, str]) -> None:
    """The embedded worker publishes where the API's SSE route reads: one process, one
    coordination."""
    url = f"{environment['NEXUS_API_URL']}/v1/sessions/main/stream"
    names: list[str] = []

    connected = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", url, timeout=20) as response:
            # The route fixes where the stream starts before it answers.
            connected.set()
            for line in response.iter_lines():
                if line.startswith("event: "):
                    names.append(line[7:])
                    if names[-1] == "session.completed":
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert connected.wait(timeout=20)
    _nexus(cwd, environment, "send", "main", "are you streaming?", "--wait")
    listener.join(timeout=20)
    for promised in ("queue.item.queued", "session.started", "step.generating", "message.created"):
        assert promised in names, (promised, names)


def _merge_is_answered_without_waiting_for_the_tick(cwd: Path, environment: dict[str, str]) -> None:
    """Two people write in, `nexus merge` joins them: the primary session answers the
    merge notice within seconds, not at the embedded timer's next 60 s tick."""
    url = environment["NEXUS_API_URL"]
    for sender in ("+15550001", "+15550002"):
        event = {
            "id": f"sms:{sender}", "adapter": "sms", "platform": "sms",
            "sender": {"id": sender}, "container": {"kind": "dm", "id": sender},
            "text": "hello", "occurred_at": 0,
        }  # fmt: skip
        assert httpx.post(f"{url}/v1/events", json=event, timeout=10).status_code == 202
    deadline = time.monotonic() + 30
    while True:
        listed = json.loads(_nexus(cwd, environment, "sessions", "--json"))
        people = sorted(s["label"] for s in listed["items"] if s["label"].startswith("dm:"))
        if len(people) == 2:
            break
        assert time.monotonic() < deadline, f"no sessions for the senders: {listed}"
        time.sleep(0.2)
    first, second = (label.removeprefix("dm:") for label in people)
    merged = _nexus(cwd, environment, "merge", second, "--into", first)
    primary = re.search(r"primary session: (\S+)", merged)
    assert primary is not None, merged
    began = time.monotonic()
    while True:
        items = json.loads(_nexus(cwd, environment, "queue", primary.group(1), "--json"))
        [notice] = [i for i in items if i["payload"].get("kind") == "identity_merge"]
        if notice["disposition"] is not None:
            break
        assert time.monotonic() - began < 20, f"merge notice still waiting: {notice}"
        time.sleep(0.2)
    assert notice["disposition"] == "consumed"


def _readme_run_command() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run it", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.+?)\n```", section, flags=re.DOTALL)
    assert found is not None, "the README's Run it section has no sh block"
    return found.group(1).strip()


def _fresh_copy(destination: Path) -> Path:
    """The tree as a clone of it would have it (tracked and new files, nothing ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_following_the_readme_runs_nexus_and_it_answers(tmp_path: Path) -> None:
    command = _readme_run_command()
    assert command == "./scripts/dev"
    clone = _fresh_copy(tmp_path / "nexus")
    port = free_port()
    # The virtualenv this suite runs in stands in for the one the script would create, so
    # the test does not spend minutes installing (the script checks it is up to date).
    # Were it out of date, the script would install the clone into it, and the suite's
    # virtualenv would point at a folder that is gone when this test ends: refuse instead.
    stamp = Path(sys.prefix) / ".nexus-installed-dev"
    # scripts/lib.sh's install_digest: pyproject.toml and the lock, one after the other.
    installed_from = (clone / "pyproject.toml").read_bytes()
    installed_from += (clone / "requirements" / "dev.lock").read_bytes()
    wanted = hashlib.sha256(installed_from).hexdigest()
    assert stamp.exists() and stamp.read_text().strip() == wanted, (
        f"{sys.prefix} was not installed from this pyproject.toml and lock: run ./scripts/test, "
        "which reinstalls it, rather than pytest on its own"
    )
    environment = {**_clean_environment(port), "NEXUS_VENV": sys.prefix}
    with _running(["bash", "-c", f"{command} --port {port}"], clone, environment):
        answer = _nexus(tmp_path, environment, "send", "main", "hi from the README", "--wait")
    assert "You said: hi from the README" in answer
    assert (clone / ".nexus" / "nexus.db").exists()
