"""`nexus flower` as a real process: its password reaches Flower through the environment,
never the command line (which any user on the host can read in `ps`)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.integration.processes import nexus_process
from tests.integration.worker_process import wait_for, worker_environment
from tests.support import free_port, port_open

pytestmark = [pytest.mark.redis, pytest.mark.slow]
PASSWORD = "canary-0f3b9e17-flower-password"


def _process_tree(pid: int) -> list[int]:
    """`pid` and every descendant, from /proc's children lists."""
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            children = (task / "children").read_text().split()
            found += [int(child) for child in children]
            frontier += [int(child) for child in children]
    return found


def test_flower_takes_its_password_from_the_environment_not_the_command_line(
    tmp_path: Path,
) -> None:
    port = free_port()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "FLOWER_"))},
        **worker_environment("sqlite:///" + str(tmp_path / "unused.db")),
        "NEXUS_FLOWER_BASIC_AUTH": f"ops:{PASSWORD}",
    }
    log = tmp_path / "flower.log"
    with nexus_process(["flower", "--port", str(port)], log, environment) as process:
        wait_for(lambda: port_open(port), timeout=60, what="Flower")
        tree = _process_tree(process.pid)
        command_lines = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in tree}
        assert any(b"flower" in line for line in command_lines.values())
        assert not [pid for pid, line in command_lines.items() if PASSWORD.encode() in line]

        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/api/workers", timeout=10).status_code == 401
        wrong = httpx.get(f"{base}/api/workers", auth=("ops", "wrong"), timeout=10)
        assert wrong.status_code == 401
        right = httpx.get(f"{base}/api/workers", auth=("ops", PASSWORD), timeout=20)
        assert right.status_code == 200
    assert PASSWORD not in log.read_text()


def test_flower_with_an_empty_password_setting_lets_nobody_in(tmp_path: Path) -> None:
    port = free_port()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "FLOWER_"))},
        **worker_environment("sqlite:///" + str(tmp_path / "unused.db")),
        "NEXUS_FLOWER_BASIC_AUTH": "",
    }
    with nexus_process(["flower", "--port", str(port)], tmp_path / "flower.log", environment):
        wait_for(lambda: port_open(port), timeout=60, what="Flower")
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/api/workers", timeout=10).status_code == 401
        assert httpx.get(f"{base}/api/workers", auth=("", ""), timeout=10).status_code == 401
        assert httpx.get(f"{base}/healthcheck", timeout=10).status_code == 200
