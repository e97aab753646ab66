"""One hook call in a hook process, served from a thread of the worker.

The thread sends the call, answers the hook's lookups and model calls from the worker's
own context, and takes the result. Whichever comes first ends the call: the result, or
its deadline (the hook's timeout from the moment its process is ready), at which the
process is killed. A hook's code never runs on the worker's threads, so none is held by it.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from nexus.hooks.pool import HookPool
from nexus.hooks.protocol import (
    ProtocolError,
    info_as_json,
    receive,
    result_from_json,
    send,
    state_from_json,
)
from nexus.hooks.spec import HookContext, HookResult, HookSqlError

if TYPE_CHECKING:
    from nexus.hooks.evaluator import Invocation

# A new process imports Nexus before it is ready; its hook's timeout starts after that.
STARTUP_LIMIT_S = 10.0
MAX_EVENTS = 1000  # the most a hook may ask of search_events / recent_events at once


class RemoteCall:
    def __init__(self, pool: HookPool, context: HookContext, invocation: Invocation) -> None:
        self.pool = pool
        self.context = context
        self.invocation = invocation
        self.deadline = time.monotonic() + STARTUP_LIMIT_S
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._ended = False
        self._released = False
        self._sent_at = time.monotonic()
        self._process = pool.acquire()

    def serve(self) -> None:
        """The thread's work: the call from start to finish."""
        try:
            self._serve()
        finally:
            if not self._released:  # killed: this thread was the socket's last user
                self._process.connection.close()

    def _serve(self) -> None:
        try:
            answer = self._exchange()
        except (EOFError, OSError):
            self._end(error=self._death(), healthy=False)
            return
        except ProtocolError as error:
            self._end(error=f"the hook process answered nonsense: {error}", healthy=False)
            return
        if answer is None:
            self.expire()
            return
        try:
            sent_back = answer.get("state")  # None: not JSON, so as it was sent
            state = None if sent_back is None else state_from_json(sent_back)
            if answer.get("error") is not None:
                failure = str(answer["error"])
                # Near its memory limit, its heap may stay fragmented: replace the process.
                fresh = not failure.startswith("MemoryError")
                self._end(error=failure, state=state, healthy=fresh)
            else:
                result = result_from_json(answer.get("result"))
                self._end(result=result, state=state, healthy=True)
        except ProtocolError as error:
            self._end(error=f"the hook process answered nonsense: {error}", healthy=False)

    def expire(self) -> None:
        """At the deadline: the call is over, its process killed (and replaced)."""
        hook = self.invocation.hook
        if self._finish():
            if self._process.ready:
                self.invocation.error = f"timed out after {hook.meta.timeout_s:g} s"
                self.invocation.latency_ms = int(hook.meta.timeout_s * 1000)
            else:
                self.invocation.error = f"the hook process did not start in {STARTUP_LIMIT_S:g} s"
                self.invocation.latency_ms = int(STARTUP_LIMIT_S * 1000)
            self.invocation.result = None
            self.pool.discard(self._process)
            self.done.set()

    def _exchange(self) -> dict[str, Any] | None:
        """The process's final answer, or None at the deadline."""
        connection = self._process.connection
        if not self._process.ready:
            started = self._next(connection)
            if started is None:
                return None
            if started["op"] != "ready":
                raise ProtocolError(f"unexpected {started['op']!r}")
            self._process.ready = True
        hook = self.invocation.hook
        self._sent_at = time.monotonic()
        self.deadline = self._sent_at + hook.meta.timeout_s
        known = hook.content_hash in self._process.sources
        send(
            connection,
            {
                "op": "call",
                "hook": {
                    "path": hook.path,
                    "hash": hook.content_hash,
                    "source": None if known else hook.source,
                },
                "event": self.context.event.model_dump(mode="json"),
                "now_ms": self.context.now_ms,
                "minute_ms": self.context.minute_ms,
                "state": self.context.state,
                "timeout_s": hook.meta.timeout_s,
            },
        )
        self._process.sources.add(hook.content_hash)
        while (message := self._next(connection)) is not None:
            if message["op"] == "done":
                return message
            if message["op"] != "ask":
                raise ProtocolError(f"unexpected {message['op']!r}")
            send(connection, _answer(self.context, message))
        return None

    def _next(self, connection: Any) -> dict[str, Any] | None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not connection.poll(remaining):
            return None
        return receive(connection)

    def _end(
        self,
        *,
        error: str | None = None,
        result: HookResult | None = None,
        state: dict[str, Any] | None = None,
        healthy: bool,
    ) -> None:
        if not self._finish():
            return  # expired meanwhile: that outcome stands, the caller may be using it
        if state is not None:  # else, as sent: what the call changed is lost with it
            self.invocation.state = state
        self.invocation.error = error
        self.invocation.result = None if error is not None else result
        self.invocation.latency_ms = int((time.monotonic() - self._sent_at) * 1000)
        if healthy:
            self._released = True
            self.pool.release(self._process)
        else:
            self.pool.discard(self._process)
        self.done.set()

    def _finish(self) -> bool:
        """True for the one caller that ends the call."""
        with self._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    def _death(self) -> str:
        process = self._process.process
        try:
            code = process.wait(timeout=1.0)
        except Exception:
            return "the hook process stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            why = " (its CPU time limit)" if -code == signal.SIGXCPU else ""
            return f"the hook process was killed by {name}{why}"
        return f"the hook process exited with status {code}"


def _answer(context: HookContext, message: dict[str, Any]) -> dict[str, Any]:
    """A lookup or model call the hook made, done by the worker for it (arguments checked:
    they come from the hook)."""
    fn, args = message.get("fn"), message.get("args")
    try:
        if not isinstance(args, list):
            raise TypeError("arguments must be a list")
        value: Any
        if fn == "search_events" and _shape(args, str, int):
            found = context.search_events(args[0], _limit(args[1]))
            value = [event.model_dump(mode="json") for event in found]
        elif fn == "recent_events" and _shape(args, int):
            value = [e.model_dump(mode="json") for e in context.recent_events(_limit(args[0]))]
        elif fn == "llm" and _shape(args, str):
            value = context.llm(args[0])
        elif fn == "sql" and _shape(args, str, dict):
            value = context.sql(args[0], args[1])
        elif fn == "hook" and _shape(args):
            value = info_as_json(context.hook)
        else:
            raise TypeError(f"no call {fn!r} with arguments {args!r}")
        return {"op": "answer", "value": value}
    except HookSqlError as error:  # its message is the whole story, for the hook to raise
        return {"op": "answer", "error": str(error)}
    except Exception as error:
        return {"op": "answer", "error": f"{type(error).__name__}: {error}"}


def _shape(args: list[Any], *types: type) -> bool:
    return len(args) == len(types) and all(
        isinstance(arg, kind) and not isinstance(arg, bool)
        for arg, kind in zip(args, types, strict=True)
    )


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_EVENTS:
        raise ValueError(f"limit must be between 1 and {MAX_EVENTS}")
    return limit
