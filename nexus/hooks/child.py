"""A hook process: runs its worker's hook calls one at a time, under memory and CPU limits.

Started by nexus/hooks/pool.py with a scrubbed environment, in a session of its own (so
the worker can kill it with whatever it started), on one end of a socket pair. It never
holds the worker's database or model: a hook's lookups and model calls are asked of the
worker over the socket.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from nexus.hooks.protocol import info_from_json, receive, result_as_json, send
from nexus.hooks.spec import HookContext, HookInfo, HookResult, HookSqlError
from nexus.ledger.records import EventRecord

Evaluate = Callable[[HookContext], HookResult]


def main(argv: list[str]) -> None:
    """argv: the socket's file descriptor, the memory limit in MiB (0: none)."""
    connection = Connection(int(argv[0]))
    memory_mb = int(argv[1])
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _exit_with_parent(os.getppid())
    send(connection, {"op": "ready"})
    loaded: dict[str, Evaluate] = {}
    while True:
        try:
            request = receive(connection)
        except EOFError:
            return  # the worker closed the pool
        if request["op"] != "call":
            return
        send(connection, _call(connection, request, loaded, memory_mb))


def _call(
    connection: Connection, request: dict[str, Any], loaded: dict[str, Evaluate], memory_mb: int
) -> dict[str, Any]:
    hook = request["hook"]
    state: dict[str, Any] = request["state"]
    try:
        evaluate = loaded.get(hook["hash"])
        if evaluate is None:
            if hook["source"] is None:
                raise LookupError("no source: a hook given as a function runs only on threads")
            evaluate = loaded[hook["hash"]] = _load(hook["path"], hook["hash"], hook["source"])
        context = HookContext(
            event=EventRecord.model_validate(request["event"]),
            now_ms=request["now_ms"],
            minute_ms=request["minute_ms"],
            state=state,
            search_events=partial(_search, connection),
            recent_events=partial(_recent, connection),
            llm=partial(_llm, connection),
            sql=partial(_sql, connection),
            about_hook=partial(_about_hook, connection),
        )
        _limit_cpu(float(request["timeout_s"]))
        result = evaluate(context)
        if not isinstance(result, HookResult):
            raise TypeError(f"evaluate returned {type(result).__name__}, not HookResult")
        answer = {"op": "done", "result": result_as_json(result), "state": state}
        json.dumps(answer)  # its state must be JSON too: it is saved in a JSON column
        return answer
    except MemoryError:
        # The heap may be left fragmented near its limit: the worker replaces this process.
        return _failed(f"MemoryError: over the hook memory limit of {memory_mb} MiB", state)
    except (Exception, SystemExit) as error:
        return _failed(f"{type(error).__name__}: {error}", state)


def _failed(error: str, state: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(state)
    except (TypeError, ValueError):
        return {"op": "done", "error": error, "state": None}
    return {"op": "done", "error": error, "state": state}


def _load(path: str, digest: str, source: str) -> Evaluate:
    """The hook's module, from the source the worker loaded (not the file as it is now)."""
    module = types.ModuleType(f"nexus_hook_{os.path.basename(path)[:-3]}_{digest[:8]}")
    module.__file__ = path
    # The hook's own code, which loader.py ran too: this process is where it may run.
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102
    evaluate: Evaluate = module.__dict__["evaluate"]
    return evaluate


def _limit_cpu(timeout_s: float) -> None:
    """A CPU-time backstop for this call (SIGXCPU ends the process): the worker kills it at
    its wall-clock timeout first, unless the worker itself is gone."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used) + math.ceil(timeout_s) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _ask(connection: Connection, fn: str, *args: Any) -> Any:
    send(connection, {"op": "ask", "fn": fn, "args": list(args)})
    answer = receive(connection)
    if answer.get("error") is not None:
        raise RuntimeError(answer["error"])
    return answer.get("value")


def _search(connection: Connection, query: str, limit: int = 10) -> list[EventRecord]:
    found = _ask(connection, "search_events", query, limit)
    return [EventRecord.model_validate(event) for event in found]


def _recent(connection: Connection, limit: int = 20) -> list[EventRecord]:
    found = _ask(connection, "recent_events", limit)
    return [EventRecord.model_validate(event) for event in found]


def _llm(connection: Connection, prompt: str) -> str:
    return str(_ask(connection, "llm", prompt))


def _sql(
    connection: Connection, query: str, params: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    try:
        rows: list[dict[str, Any]] = _ask(connection, "sql", query, dict(params or {}))
    except RuntimeError as error:
        raise HookSqlError(str(error)) from None
    return rows


def _about_hook(connection: Connection) -> HookInfo:
    return info_from_json(_ask(connection, "hook"))


def _exit_with_parent(parent: int) -> None:
    """A worker killed outright cannot kill its hook processes: they notice and leave."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
