"""A pool of hook processes, started on first use in the process that uses it.

Each hook call borrows a process of its own (several hooks run at once on one event), and
gives it back when the call ends; a process that timed out, died or ran out of memory is
killed and another started in its place. Processes belong to the process that started
them: a forked child (a Celery prefork worker) that inherits the pool starts its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import nexus

# What a hook process gets of the worker's environment: enough to run Python, nothing else
# unless the deployment names it (NEXUS_HOOKS_ENV). No NEXUS_* setting, no database URL, no
# API key reaches a hook by default.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_LAUNCH = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[3]); "
    "from nexus.hooks.child import main; main(sys.argv[1:3])"
)


@dataclass(eq=False)
class HookProcess:
    process: subprocess.Popen[bytes]
    connection: Connection
    ready: bool = False
    sources: set[str] = field(default_factory=set)  # hooks (content hashes) it was sent


def hook_env(names: Sequence[str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a hook process: BASE_ENV and the names the deployment allows."""
    source = dict(os.environ) if environ is None else environ
    return {name: source[name] for name in (*BASE_ENV, *names) if name in source}


class HookPool:
    """Keeps up to `size` idle hook processes; a call beyond them gets one of its own."""

    def __init__(
        self, *, size: int = 4, memory_mb: int = 512, env_names: Sequence[str] = ()
    ) -> None:
        self.size = size
        self.memory_mb = memory_mb
        self.env_names = tuple(env_names)
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._idle: list[HookProcess] = []
        self._all: set[HookProcess] = set()
        weakref.finalize(self, _kill_all, self._all, self._owner)
        _POOLS.add(self)

    def acquire(self) -> HookProcess:
        """An idle process, or a new one (not waited for: the call waits for it to be ready)."""
        with self._lock:
            self._adopt()
            # A ready one first: a replacement may still be importing Nexus.
            for index in range(len(self._idle) - 1, -1, -1):
                if self._idle[index].ready:
                    return self._idle.pop(index)
            if self._idle:
                return self._idle.pop()
        return self._start()

    def release(self, hook_process: HookProcess) -> None:
        """Back to the idle ones after a clean call (stopped if enough are idle already)."""
        with self._lock:
            mine = self._owner == os.getpid() and hook_process in self._all
            if mine and len(self._idle) < self.size:
                self._idle.append(hook_process)
                return
        self.discard(hook_process, refill=False)
        hook_process.connection.close()

    def discard(self, hook_process: HookProcess, *, refill: bool = True) -> None:
        """Kill it with whatever it started, and start its replacement. Its socket is left
        to the thread that was using it, which closes it when it is done (closing it under
        that thread could hand its number to another file meanwhile)."""
        with self._lock:
            owned = self._owner == os.getpid() and hook_process in self._all
            self._all.discard(hook_process)
            wanted = owned and refill and len(self._idle) < self.size
        if owned:
            _kill(hook_process)
        if wanted:
            self.release(self._start())

    def idle(self) -> int:
        with self._lock:
            return len(self._idle) if self._owner == os.getpid() else 0

    def close(self) -> None:
        """Stop every process; the next call starts new ones (a worker about to fork)."""
        with self._lock:
            self._adopt()
            processes = list(self._all)
            idle = list(self._idle)
            self._all.clear()
            self._idle.clear()
        for hook_process in processes:
            _kill(hook_process)
        for hook_process in idle:  # the busy ones' threads close theirs
            hook_process.connection.close()

    def _start(self) -> HookProcess:
        ours, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [
                    sys.executable,
                    "-I",  # no PYTHON* variables, no user site, no current directory
                    "-c",
                    _LAUNCH,
                    str(theirs.fileno()),
                    str(self.memory_mb),
                    json.dumps(_import_path()),
                ],
                pass_fds=(theirs.fileno(),),
                env=hook_env(self.env_names),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: killed with its children
            )
        finally:
            theirs.close()
        hook_process = HookProcess(process, Connection(ours.detach()))
        with self._lock:
            self._adopt()
            self._all.add(hook_process)
        return hook_process

    def _adopt(self) -> None:
        """In a forked child: forget the parent's processes (they are not ours to kill), and
        close the inherited sockets so that they close when the parent closes them."""
        if self._owner == os.getpid():
            return
        for inherited in self._all:
            inherited.connection.close()
        self._all.clear()
        self._idle.clear()
        self._owner = os.getpid()
        weakref.finalize(self, _kill_all, self._all, self._owner)


_POOLS: weakref.WeakSet[HookPool] = weakref.WeakSet()


def _fresh_locks() -> None:
    # A fork taken while another thread held a pool's lock would leave it held forever.
    for pool in _POOLS:
        pool._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks)


def _import_path() -> list[str]:
    """What the worker imports from, so that a hook imports what it could before; Nexus's
    own directory first, however the worker found it."""
    root = str(Path(nexus.__file__).resolve().parent.parent)
    return [root, *(entry for entry in sys.path if entry and entry != root)]


def _kill(hook_process: HookProcess) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(hook_process.process.pid, signal.SIGKILL)
    hook_process.process.wait()


def _kill_all(processes: set[HookProcess], owner: int) -> None:
    """At exit (or when the pool is dropped), in the process that started them only."""
    if os.getpid() != owner:
        return
    for hook_process in list(processes):
        _kill(hook_process)
    processes.clear()
