"""run_python's jail: the bwrap command line (pure), and the refusals when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.adapters import python_tool
from nexus.adapters.bubblewrap import (
    ETC_NETWORK,
    Jail,
    bwrap_argv,
    interpreter_candidates,
    python_dirs,
    visible,
)
from nexus.adapters.python_tool import NO_BWRAP, RUN_PYTHON
from nexus.engine.sandbox import SandboxConfig
from nexus.engine.tools import ToolContext, ToolFailure

JAIL = Jail(interpreter="/opt/py/bin/python3.11", python_dirs=("/opt/py",))
CONTEXT = ToolContext(
    session_id="s",
    session_label="dm:x",
    turn_id="t",
    persona_id="p",
    now_ms=0,
    sandbox=SandboxConfig(),
)


def _pairs(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, value in enumerate(argv) if value == option]


def test_the_jail_shares_nothing_by_default() -> None:
    argv = bwrap_argv("/usr/bin/bwrap", JAIL, "/tmp/run/program.py", 7, ("-c", "pass"))
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"):
        assert flag in argv
    assert {"--new-session", "--clearenv"} <= set(argv) and "--share-net" not in argv
    assert _pairs(argv, "--cap-drop") == ["ALL"] and _pairs(argv, "--uid") == ["65534"]
    assert _pairs(argv, "--json-status-fd") == ["7"]
    assert _pairs(argv, "--proc") == ["/proc"] and _pairs(argv, "--tmpfs") == ["/tmp", "/sandbox"]
    assert _pairs(argv, "--setenv") == ["PATH", "HOME", "LANG"]
    assert _pairs(argv, "--ro-bind") == ["/opt/py", "/tmp/run/program.py"]
    read_only = _pairs(argv, "--ro-bind-try")
    assert "/usr" in read_only and "/etc/localtime" in read_only
    assert not set(ETC_NETWORK) & set(read_only)
    # Nothing writable from the host, and the program last, in isolated mode.
    assert "--bind" not in argv and "--bind-try" not in argv
    assert argv[argv.index("--") :] == ["--", "/opt/py/bin/python3.11", "-I", "-c", "pass"]


def test_a_network_grant_shares_the_hosts_network_and_its_resolver() -> None:
    jail = Jail(interpreter=JAIL.interpreter, python_dirs=JAIL.python_dirs, network=True)
    argv = bwrap_argv("bwrap", jail, "/tmp/p.py", 3, ())
    assert "--share-net" in argv
    assert set(ETC_NETWORK) <= set(_pairs(argv, "--ro-bind-try"))


def test_only_the_python_installation_is_added_to_the_view() -> None:
    assert python_dirs(["/usr", "/usr/local"]) == ()  # a Debian Python: /usr is bound anyway
    pyenv = "/root/.pyenv/versions/3.11.7"
    assert python_dirs([pyenv, pyenv + "/"]) == (pyenv,)
    with pytest.raises(ValueError, match="refusing"):
        python_dirs(["/"])
    with pytest.raises(ValueError, match="refusing"):
        python_dirs(["relative"])
    assert interpreter_candidates(pyenv, (3, 11)) == (
        f"{pyenv}/bin/python3.11",
        f"{pyenv}/bin/python3",
    )
    assert visible("/opt/py/bin/python3", JAIL) and visible("/usr/bin/python3", JAIL)
    assert not visible("/work/project/.venv/bin/python", JAIL)
    assert not visible("/opt/python", JAIL)  # a sibling, not under /opt/py


def test_without_bubblewrap_run_python_is_refused_not_run_unjailed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    assert python_tool.find_bwrap() is None
    witness = tmp_path / "ran"
    with pytest.raises(ToolFailure) as refused:
        RUN_PYTHON.run({"code": f"open({str(witness)!r}, 'w')"}, CONTEXT)
    assert str(refused.value) == NO_BWRAP
    assert NO_BWRAP == (
        "run_python needs bubblewrap (apt-get install bubblewrap); it never runs unsandboxed"
    )
    assert not witness.exists()


def test_a_jail_that_cannot_start_is_a_tool_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A bwrap that fails as it would where user namespaces are not allowed.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(python_tool, "find_bwrap", lambda: str(fake))
    with pytest.raises(ToolFailure, match="sandbox did not start: bwrap: setting up uid map"):
        RUN_PYTHON.run({"code": "print(1)"}, CONTEXT)
