"""The `run_python` tool: a short Python program in a bubblewrap jail, under limits.

The jail (`nexus.adapters.bubblewrap`) shows the program none of the worker: not its
processes (and so not their environment), not its files, not its network unless the
persona grants it (`permissions.sandbox.network`). Inside, the program has an address-space
and CPU limit and a cap on what it may write; after its wall-clock timeout the jail and
everything in it are killed. Without bubblewrap the tool refuses: it never runs unjailed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nexus.adapters.bubblewrap import (
    BWRAP,
    INSTALL_HINT,
    PROGRAM,
    Jail,
    bwrap_argv,
    interpreter_candidates,
    python_dirs,
    visible,
)
from nexus.engine.model import ToolSpec
from nexus.engine.sandbox import SandboxConfig
from nexus.engine.tools import Tool, ToolContext, ToolFailure

MAX_OUTPUT_BYTES = 1024 * 1024  # a write past this fails in the child (RLIMIT_FSIZE)
MAX_SHOWN_CHARS = 16_000  # of stdout and of stderr, what the model is shown
MAX_CODE_CHARS = 100_000
NO_BWRAP = f"run_python needs bubblewrap ({INSTALL_HINT}); it never runs unsandboxed"
# Runs in the jail before the program: limits first, then the program as __main__.
_RUNNER = f"""
import resource, sys
memory, cpu, output = (int(value) for value in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
source = open({PROGRAM!r}, encoding="utf-8").read()
sys.argv = [{PROGRAM!r}]
exec(compile(source, {PROGRAM!r}, "exec"), {{"__name__": "__main__"}})
"""


def find_bwrap() -> str | None:
    """bubblewrap's path on this worker's PATH, looked up at each call (never at import)."""
    return shutil.which(BWRAP)


def this_python(network: bool) -> Jail:
    """A jail for the interpreter this worker runs on: its installation's own binary,
    not a virtualenv's (the virtualenv is in the project, which the jail must not show)."""
    dirs = python_dirs((sys.base_prefix, sys.base_exec_prefix))
    jail = Jail(interpreter="", python_dirs=dirs, network=network)
    candidates = (
        *interpreter_candidates(sys.base_exec_prefix, sys.version_info[:2]),
        os.path.realpath(sys.executable),
    )
    for candidate in candidates:
        if visible(candidate, jail) and os.access(candidate, os.X_OK):
            return Jail(interpreter=candidate, python_dirs=dirs, network=network)
    raise ToolFailure(f"run_python found no Python interpreter to jail under {dirs}")


def run_python(code: str, limits: SandboxConfig) -> dict[str, Any]:
    """Run `code` in the jail; its exit code, what it printed (cut to MAX_SHOWN_CHARS) and
    whether it ran out of time. ToolFailure when the jail cannot be had."""
    bwrap = find_bwrap()
    if bwrap is None:
        raise ToolFailure(NO_BWRAP)
    jail = this_python(limits.network)
    with tempfile.TemporaryDirectory(prefix="nexus-run-python-") as workdir:
        work = Path(workdir)
        (work / PROGRAM).write_text(code, encoding="utf-8")
        with (
            (work / ".stdout").open("wb") as out,
            (work / ".stderr").open("wb") as err,
            (work / ".status").open("w+b") as status,
        ):
            limits_argv = (
                str(limits.memory_mb * 1024 * 1024),
                str(max(1, int(limits.timeout_seconds))),
                str(MAX_OUTPUT_BYTES),
            )
            argv = bwrap_argv(
                bwrap, jail, str(work / PROGRAM), status.fileno(), ("-c", _RUNNER, *limits_argv)
            )
            process = subprocess.Popen(  # noqa: S603 - bubblewrap, the argv built above
                argv,
                env={},  # bwrap needs none; the jail's own is set by --setenv
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(status.fileno(),),
                start_new_session=True,  # its own process group: killed with the jail
            )
            timed_out = False
            try:
                process.wait(timeout=limits.timeout_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # bwrap's death kills the jail's init (--die-with-parent), and with it
                # every process in the jail's PID namespace.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            status.seek(0)
            started = _started(status.read())
        stderr = _shown(work / ".stderr")
        if not started and not timed_out:
            raise ToolFailure(f"run_python's sandbox did not start: {stderr.strip()[-500:]}")
        return {
            "exit_code": process.returncode,
            "stdout": _shown(work / ".stdout"),
            "stderr": stderr,
            "timed_out": timed_out,
        }


def _started(status: bytes) -> bool:
    """Whether bwrap set the jail up: it reports the jailed child's pid once it has."""
    return b'"child-pid"' in status


def _shown(path: Path) -> str:
    with path.open("rb") as file:
        data = file.read(MAX_SHOWN_CHARS * 4 + 1)
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_SHOWN_CHARS:
        return text[:MAX_SHOWN_CHARS] + "\n[output cut]"
    return text


def _run(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    if context.sandbox is None:  # the toolbox refuses first; a direct call must not slip by
        raise ToolFailure("run_python needs the persona's sandbox permissions")
    code = str(arguments["code"])
    if len(code) > MAX_CODE_CHARS:
        raise ToolFailure(f"code is longer than {MAX_CODE_CHARS} characters")
    return run_python(code, context.sandbox)


RUN_PYTHON = Tool(
    spec=ToolSpec(
        name="run_python",
        description=(
            "Run a short Python 3 program and return its exit code, stdout and stderr. Each "
            "run starts fresh in an empty directory of a sandbox, under a time and memory "
            "limit, with only the standard library and, unless granted, no network; print "
            "what you want to see."
        ),
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the program"}},
            "required": ["code"],
        },
    ),
    run=_run,
    sandboxed=True,
)
