"""`run_python`'s jail with real processes: every way out a program might try fails.

Each escape runs in a worker process of its own, as a Celery worker would hold it: with a
credential in its environment (`/proc/<pid>/environ` shows the environment a process
started with, so a variable set in the test's own process would prove nothing), a secrets
file and a SQLite ledger on disk, and the tool called the way the toolbox calls it.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import nexus

SECRET = "secret-value"
# The worker: reads {"code", "sandbox"} on stdin, puts its own pid into the code (the model
# would guess it; the test knows it) and prints what the tool answered.
_WORKER = """
import json, os, sys
from nexus.adapters.python_tool import RUN_PYTHON
from nexus.engine.sandbox import sandbox_config
from nexus.engine.tools import ToolContext, ToolFailure
ask = json.load(sys.stdin)
context = ToolContext(
    session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=0,
    sandbox=sandbox_config(ask["sandbox"]),
)
code = ask["code"].replace("WORKER_PID", str(os.getpid()))
try:
    print(json.dumps(RUN_PYTHON.run({"code": code}, context)))
except ToolFailure as error:
    print(json.dumps({"tool_error": str(error)}))
"""


class Listener(ThreadingHTTPServer):
    """A loopback HTTP server that records every connection it accepts."""

    def __init__(self) -> None:
        self.accepted: list[Any] = []
        super().__init__(("127.0.0.1", 0), _Hello)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.accepted.append(client_address)
        return True


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def worker_files(tmp_path: Path) -> dict[str, Path]:
    secrets = tmp_path / "secrets.yaml"
    secrets.write_text(f"github: {SECRET}\n")
    secrets.chmod(0o600)
    ledger = tmp_path / "nexus.db"
    with sqlite3.connect(ledger) as db:
        db.execute("CREATE TABLE credentials (token TEXT)")
        db.execute("INSERT INTO credentials VALUES (?)", (SECRET,))
    return {"secrets": secrets, "ledger": ledger}


def in_worker(code: str, files: dict[str, Path] | None = None, **sandbox: Any) -> dict[str, Any]:
    """What `run_python` answered `code` in a worker process holding the secrets."""
    env = {
        **os.environ,
        "NEXUS_CREDENTIAL_GITHUB": SECRET,
        "ANTHROPIC_API_KEY": f"sk-{SECRET}",
    }
    if files:
        env["NEXUS_SECRETS_FILE"] = str(files["secrets"])
        env["NEXUS_DATABASE_URL"] = f"sqlite:///{files['ledger']}"
    ran = subprocess.run(
        [sys.executable, "-c", _WORKER],
        input=json.dumps({"code": code, "sandbox": sandbox}),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, Any] = json.loads(ran.stdout.splitlines()[-1])
    assert "tool_error" not in answer, answer
    return answer


def test_the_workers_environment_is_out_of_reach() -> None:
    code = """
import glob, os
for path in ["/proc/WORKER_PID/environ", "/proc/WORKER_PID/cmdline", *glob.glob("/proc/*/environ")]:
    try:
        print(path, open(path, "rb").read())
    except OSError as error:
        print(path, type(error).__name__)
print(sorted(os.environ.items()))
"""
    ran = in_worker(code)
    assert ran["exit_code"] == 0, ran
    assert SECRET not in ran["stdout"] + ran["stderr"]
    assert "/proc/WORKER_PID/environ FileNotFoundError" not in ran["stdout"]  # pid replaced
    worker_environ, worker_cmdline = ran["stdout"].splitlines()[:2]
    assert worker_environ.endswith("/environ FileNotFoundError"), ran["stdout"]
    assert worker_cmdline.endswith("/cmdline FileNotFoundError"), ran["stdout"]
    environment = ran["stdout"].splitlines()[-1]
    assert environment == (
        "[('HOME', '/sandbox'), ('LANG', 'C.UTF-8'), "
        "('PATH', '/usr/local/bin:/usr/bin:/bin'), ('PWD', '/sandbox')]"
    )


def test_the_secrets_file_the_ledger_and_the_project_are_out_of_reach(
    worker_files: dict[str, Path],
) -> None:
    project = Path(nexus.__file__).resolve().parent.parent
    paths = [
        worker_files["secrets"],
        worker_files["ledger"],
        project / "pyproject.toml",
        project / ".venv" / "pyvenv.cfg",
        Path(sys.executable),  # the virtualenv's python: the project's directory
        Path.home() / ".bash_history",
    ]
    code = f"""
for path in {[str(path) for path in paths]!r}:
    try:
        print(path, open(path, "rb").read()[:200])
    except OSError as error:
        print(path, type(error).__name__)
"""
    ran = in_worker(code, worker_files)
    assert ran["exit_code"] == 0, ran
    assert SECRET not in ran["stdout"] + ran["stderr"]
    for path, line in zip(paths, ran["stdout"].splitlines(), strict=True):
        assert line == f"{path} FileNotFoundError", line


def test_no_connection_reaches_the_workers_services(listener: Listener) -> None:
    port = listener.server_address[1]
    socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it does listen
    _wait_for(lambda: len(listener.accepted) == 1)
    code = f"""
import errno, socket
for port in (5432, 6379, {port}):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        print(port, "connected")
    except OSError as error:
        print(port, errno.errorcode.get(error.errno, error))
"""
    ran = in_worker(code)
    assert ran["exit_code"] == 0, ran
    for line in ran["stdout"].splitlines():
        assert line.split()[1] in ("ECONNREFUSED", "ENETUNREACH"), ran["stdout"]
    assert len(ran["stdout"].splitlines()) == 3
    time.sleep(0.2)  # what the server thread might still be accepting
    assert len(listener.accepted) == 1  # the test's own: nothing from the jail


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_other_processes_are_out_of_sight() -> None:
    code = """
import os
print(sorted(int(name) for name in os.listdir("/proc") if name.isdigit()))
try:
    os.kill(WORKER_PID, 0)
    print("signalled")
except OSError as error:
    print(type(error).__name__)
"""
    ran = in_worker(code)
    assert ran["exit_code"] == 0, ran
    pids, signalled = ran["stdout"].splitlines()
    assert pids == "[1, 2]"  # the jail's init and the program, nothing of the host
    assert signalled == "ProcessLookupError"


def test_a_persona_granted_the_network_reaches_the_host(listener: Listener) -> None:
    code = f"""
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:{listener.server_address[1]}/").read().decode())
"""
    ran = in_worker(code, network=True)
    assert ran["stdout"] == "hello from the host\n", ran
    _wait_for(lambda: len(listener.accepted) == 1)
    refused = in_worker(code)  # the same program without the grant
    assert refused["exit_code"] == 1 and "URLError" in refused["stderr"]
    assert len(listener.accepted) == 1


def test_ordinary_programs_still_run() -> None:
    code = """
import decimal, fractions, hashlib, json, math, re, statistics, subprocess, sys, tempfile
print(math.factorial(20), statistics.mean([1, 2, 3, 4]), fractions.Fraction(3, 6))
print(decimal.Decimal("0.1") + decimal.Decimal("0.2"), hashlib.sha256(b"x").hexdigest()[:8])
print(json.dumps({"a": re.findall(r"\\d+", "a1b22")}))
with tempfile.NamedTemporaryFile("w+") as scratch:
    scratch.write("kept"); scratch.seek(0); print(scratch.read())
open("notes.txt", "w").write("here")
print(open("notes.txt").read(), sys.version_info[:2] >= (3, 11))
child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
print(child.stdout.strip())
"""
    ran = in_worker(code)
    assert ran == {
        "exit_code": 0,
        "stdout": (
            '2432902008176640000 2.5 1/2\n0.3 2d711642\n{"a": ["1", "22"]}\nkept\nhere True\n42\n'
        ),
        "stderr": "",
        "timed_out": False,
    }
