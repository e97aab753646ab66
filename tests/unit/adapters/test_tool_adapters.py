"""The I/O tools: `run_python` in a limited child process, `http_fetch` over real HTTP."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.adapters.http_tool import MAX_BODY_CHARS, http_fetch_tool
from nexus.adapters.python_tool import RUN_PYTHON, run_python
from nexus.engine.addresses import NetworkPermissions
from nexus.engine.credentials import Secrets
from nexus.engine.sandbox import SandboxConfig
from nexus.engine.tools import ToolContext, ToolFailure
from tests.fakes.platform_server import FakePlatforms

CONTEXT = ToolContext(session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=0)
LIMITS = SandboxConfig(timeout_seconds=10, memory_mb=256)


def test_a_program_runs_and_its_output_comes_back() -> None:
    ran = run_python("import sys\nprint(sum(range(10)))\nprint('oops', file=sys.stderr)", LIMITS)
    assert ran == {"exit_code": 0, "stdout": "45\n", "stderr": "oops\n", "timed_out": False}
    failed = run_python("raise SystemExit(3)", LIMITS)
    assert failed["exit_code"] == 3
    crashed = run_python("1/0", LIMITS)
    assert crashed["exit_code"] == 1 and "ZeroDivisionError" in crashed["stderr"]


def test_a_program_gets_no_setting_or_credential_and_an_empty_directory_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NEXUS_CREDENTIAL_GITHUB", "ghp_not-for-code")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-code")
    code = (
        "import os\nprint(sorted(os.environ))\nprint(sorted(os.listdir('.')))\nprint(os.getcwd())"
    )
    ran = run_python(code, LIMITS)
    names, files, cwd = ran["stdout"].splitlines()
    assert "NEXUS_CREDENTIAL_GITHUB" not in names and "ANTHROPIC_API_KEY" not in names
    assert files == "['program.py']"
    assert cwd == "/sandbox" != os.getcwd()  # a tmpfs of the jail's own


def test_a_program_past_its_time_is_killed_with_what_it_started() -> None:
    marker = f"nexus-grandchild-{os.getpid()}-{time.monotonic_ns()}"
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
        f"{marker!r}])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    answers: list[dict[str, Any]] = []
    running = threading.Thread(
        target=lambda: answers.append(run_python(code, SandboxConfig(timeout_seconds=2))),
    )
    running.start()
    # The jail has its own PID numbers: find the grandchild on the host by its argument.
    grandchild = None
    while grandchild is None and running.is_alive():
        grandchild = next((pid for pid in _pids() if marker.encode() in _cmdline(pid)), None)
    running.join()
    [ran] = answers
    assert ran["timed_out"] is True and ran["exit_code"] != 0
    assert ran["stdout"] == "started\n"
    assert grandchild is not None and _gone(grandchild)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie left for init to reap (in a container, nobody
    may)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_memory_and_output_are_limited() -> None:
    greedy = run_python("x = bytearray(512 * 1024 * 1024)", SandboxConfig(memory_mb=128))
    assert greedy["exit_code"] != 0 and "MemoryError" in greedy["stderr"]
    chatty = run_python("while True: print('x' * 1000)", LIMITS)
    assert chatty["timed_out"] is False and chatty["exit_code"] != 0  # SIGXFSZ at 1 MiB
    assert chatty["stdout"].endswith("[output cut]")


def test_the_tool_itself_refuses_to_run_without_a_sandbox() -> None:
    with pytest.raises(ToolFailure, match="sandbox"):
        RUN_PYTHON.run({"code": "print(1)"}, CONTEXT)
    assert RUN_PYTHON.sandboxed is True


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


# The fake platform listens on loopback, which a persona must allow explicitly.
LOOPBACK = dataclasses.replace(
    CONTEXT, network=NetworkPermissions(allow_networks=(ipaddress.ip_network("127.0.0.1"),))
)


def test_http_fetch_sends_the_named_credential_as_a_bearer_token(fake: FakePlatforms) -> None:
    tool = http_fetch_tool()
    secrets = Secrets({"api": "tok-1234"}, {"api": (f"{fake.base_url}/echo",)})
    context = dataclasses.replace(LOOPBACK, credentials=secrets)
    answer = tool.run({"url": f"{fake.base_url}/echo", "credential": "api"}, context)
    assert answer["status"] == 200 and answer["truncated"] is False
    assert '"authorization": "Bearer tok-1234"' in answer["body"]
    anonymous = tool.run({"url": f"{fake.base_url}/echo"}, LOOPBACK)
    assert '"authorization": null' in anonymous["body"]
    assert tool.credentials_for({"url": "u", "credential": "api"}) == ("api",)
    missing = tool.run({"url": f"{fake.base_url}/nowhere"}, LOOPBACK)
    assert missing["status"] == 404


def test_http_fetch_refuses_other_schemes_and_reports_a_dead_host() -> None:
    tool = http_fetch_tool(timeout_s=2)
    with pytest.raises(ToolFailure, match="http:// or https://"):
        tool.run({"url": "file:///etc/passwd"}, CONTEXT)
    with pytest.raises(ToolFailure, match="ConnectError"):
        tool.run({"url": "http://127.0.0.1:9/"}, LOOPBACK)
    assert MAX_BODY_CHARS > 0
