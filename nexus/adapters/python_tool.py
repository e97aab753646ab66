"""The `run_python` tool: a short Python program in a child process, under limits.

Not a security sandbox. The child has a scrubbed environment (no NEXUS_* setting, no
credential, no API key), a fresh empty working directory, an address-space and CPU limit,
a cap on what it may write, and a wall-clock timeout after which its whole process group
is killed. It still runs as the worker's user: it can read what that user can read and
open network connections. Grant it (the `sandbox` capability and `permissions.sandbox`)
only to personas whose users you would let run code on the worker's machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nexus.engine.model import ToolSpec
from nexus.engine.sandbox import SandboxConfig
from nexus.engine.tools import Tool, ToolContext, ToolFailure

BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
MAX_OUTPUT_BYTES = 1024 * 1024  # a write past this fails in the child (RLIMIT_FSIZE)
MAX_SHOWN_CHARS = 16_000  # of stdout and of stderr, what the model is shown
MAX_CODE_CHARS = 100_000
# Runs in the child before the program: limits first, then the program as __main__.
_RUNNER = """
import resource, sys
memory, cpu, output = (int(value) for value in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
source = open("program.py", encoding="utf-8").read()
sys.argv = ["program.py"]
exec(compile(source, "program.py", "exec"), {"__name__": "__main__"})
"""


def run_python(code: str, limits: SandboxConfig) -> dict[str, Any]:
    """Run `code`; its exit code, what it printed (cut to MAX_SHOWN_CHARS) and whether it
    ran out of time."""
    with tempfile.TemporaryDirectory(prefix="nexus-run-python-") as workdir:
        work = Path(workdir)
        (work / "program.py").write_text(code, encoding="utf-8")
        with (work / ".stdout").open("wb") as out, (work / ".stderr").open("wb") as err:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter, the runner above
                [
                    sys.executable,
                    "-I",  # no PYTHON* variables, no user site directory
                    "-c",
                    _RUNNER,
                    str(limits.memory_mb * 1024 * 1024),
                    str(max(1, int(limits.timeout_seconds))),
                    str(MAX_OUTPUT_BYTES),
                ],
                cwd=work,
                env={name: os.environ[name] for name in BASE_ENV if name in os.environ},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: killed with its children
            )
            timed_out = False
            try:
                process.wait(timeout=limits.timeout_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)  # and whatever it started
                process.wait()
        return {
            "exit_code": process.returncode,
            "stdout": _shown(work / ".stdout"),
            "stderr": _shown(work / ".stderr"),
            "timed_out": timed_out,
        }


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
            "run starts fresh in an empty directory, under a time and memory limit; print "
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
