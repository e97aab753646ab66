"""Evaluate hooks in parallel, each under its own timeout, none able to stall the rest."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus.hooks.loader import LoadedHook
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
) -> list[Invocation]:
    """Run every hook at once on its own daemon thread and wait at most its timeout.

    A hook that hangs or loops forever is abandoned at its timeout (Python cannot kill a
    thread): it is recorded as an error, the breaker soon stops calling it, and the daemon
    thread cannot keep the worker from exiting.
    """
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
