"""Evaluate hooks in parallel, each under its own timeout, none able to stall the rest."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus.hooks.loader import LoadedHook
from nexus.hooks.pool import HookPool
from nexus.hooks.remote import RemoteCall
from nexus.hooks.spec import HookContext, HookResult


@dataclass
class Invocation:
    hook: LoadedHook
    started_at: int
    latency_ms: int = 0
    result: HookResult | None = None
    error: str | None = None
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def fired(self) -> bool:
        return self.error is None and self.result is not None and self.result.fire


def evaluate_all(
    hooks: Sequence[LoadedHook],
    context_for: Callable[[LoadedHook], HookContext],
    *,
    now_ms: Callable[[], int],
    pool: HookPool | None = None,
) -> list[Invocation]:
    """Run every hook at once and wait for each at most its timeout.

    With a pool (what a deployment runs), each hook runs in a hook process of its own,
    killed at its timeout. Without one, each runs on a daemon thread of this process and a
    hook that hangs is only abandoned (Python cannot kill a thread): for hooks given as
    functions, as in tests, never for a deployment's files.
    """
    if pool is not None:
        return _in_processes(pool, hooks, context_for, now_ms)
    return _on_threads(hooks, context_for, now_ms)


def _in_processes(
    pool: HookPool,
    hooks: Sequence[LoadedHook],
    context_for: Callable[[LoadedHook], HookContext],
    now_ms: Callable[[], int],
) -> list[Invocation]:
    invocations: list[Invocation] = []
    calls: list[RemoteCall] = []
    for hook in hooks:
        context = context_for(hook)
        invocation = Invocation(hook=hook, started_at=now_ms(), state=context.state)
        invocations.append(invocation)
        try:
            call = RemoteCall(pool, context, invocation)
        except OSError as error:  # no process could be started (out of memory, of pids)
            invocation.error = f"no hook process: {error}"
            continue
        threading.Thread(target=call.serve, daemon=True, name=f"hook-{hook.meta.name}").start()
        calls.append(call)
    for call in calls:
        # The deadline moves once the call's process is ready: wait again until it passes.
        while not call.done.wait(max(0.0, call.deadline - time.monotonic())):
            if time.monotonic() >= call.deadline:
                call.expire()  # a thread still inside a model call for it is let go
                break
    return invocations


def _on_threads(
    hooks: Sequence[LoadedHook],
    context_for: Callable[[LoadedHook], HookContext],
    now_ms: Callable[[], int],
) -> list[Invocation]:
    started = time.monotonic()
    runs: list[tuple[Invocation, threading.Thread]] = []
    for hook in hooks:
        context = context_for(hook)
        invocation = Invocation(hook=hook, started_at=now_ms(), state=context.state)
        thread = threading.Thread(
            target=_call,
            args=(hook, context, invocation, started),
            daemon=True,
            name=f"hook-{hook.meta.name}",
        )
        thread.start()
        runs.append((invocation, thread))
    for invocation, thread in runs:
        deadline = started + invocation.hook.meta.timeout_s
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            invocation.error = f"timed out after {invocation.hook.meta.timeout_s:g} s"
            invocation.result = None
            invocation.latency_ms = int(invocation.hook.meta.timeout_s * 1000)
    return [invocation for invocation, _ in runs]


def _call(hook: LoadedHook, context: HookContext, invocation: Invocation, started: float) -> None:
    try:
        result = hook.evaluate(context)
        if not isinstance(result, HookResult):
            raise TypeError(f"evaluate returned {type(result).__name__}, not HookResult")
        invocation.result = result
    except Exception as error:
        invocation.error = f"{type(error).__name__}: {error}"
    finally:
        invocation.latency_ms = int((time.monotonic() - started) * 1000)
