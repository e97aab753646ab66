"""Hooks run in hook processes: killed at their timeout, held to a memory limit, given no
secrets, and answering exactly what they answer on threads."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.hooks.evaluator import Invocation, evaluate_all
from nexus.hooks.loader import LoadedHook, load_hooks
from nexus.hooks.pool import HookPool
from nexus.hooks.spec import HookContext, HookInfo, HookSqlError, LastRun
from nexus.ledger.records import EventRecord

T0 = 1_767_225_600_000
HEADER = "import os, subprocess, sys, time\nfrom nexus.hooks.spec import *\n"
HOOKS = {
    "quick": """
HOOK = HookMeta(name="quick")
def evaluate(ctx):
    return HookResult(fire=True, prompt="quick")
""",
    "forever": """
HOOK = HookMeta(name="forever", timeout_s=0.5)
def evaluate(ctx):
    helper = subprocess.Popen(["sleep", "60"])
    with open(ctx.event.text, "w") as pids:
        pids.write(f"{os.getpid()} {helper.pid}")
    while True:
        pass
""",
    "hungry": """
HOOK = HookMeta(name="hungry", timeout_s=30)
def evaluate(ctx):
    eaten = []
    while True:
        eaten.append(bytearray(32 * 2**20))
""",
    "nosy": """
HOOK = HookMeta(name="nosy")
def evaluate(ctx):
    return HookResult(extracted={"env": dict(os.environ)})
""",
    "router": """
HOOK = HookMeta(name="router")
def evaluate(ctx):
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    del ctx.state["gone"]
    found = [e.id for e in ctx.search_events("invoice", 5)] + [e.id for e in ctx.recent_events(2)]
    return HookResult(
        fire=True,
        routing=Routing(kind="session", target="finance", queue_mode="collect"),
        prompt=ctx.llm("classify " + (ctx.event.text or "")),
        extracted={"found": found, "minute": ctx.minute_ms, "now": ctx.now_ms},
    )
""",
    "greedy": """
HOOK = HookMeta(name="greedy")
def evaluate(ctx):
    try:
        ctx.recent_events(10**9)
    except RuntimeError as refused:
        return HookResult(prompt=str(refused))
    return HookResult(prompt="answered")
""",
    "unsaveable": """
HOOK = HookMeta(name="unsaveable")
def evaluate(ctx):
    ctx.state["tags"] = {"a", "b"}
    return HookResult(fire=True)
""",
    "unstorable": """
HOOK = HookMeta(name="unstorable")
def evaluate(ctx):
    ctx.state["seen"] = 1
    return HookResult(fire=True, extracted={"when": object()})
""",
    "raiser": """
HOOK = HookMeta(name="raiser")
def evaluate(ctx):
    ctx.state["tried"] = True
    raise KeyError("oops")
""",
    "nonsense": """
HOOK = HookMeta(name="nonsense")
def evaluate(ctx):
    return "fire"
""",
    "self_aware": """
HOOK = HookMeta(name="self_aware")
def evaluate(ctx):
    rows = ctx.sql("SELECT :n AS n", {"n": 3})
    try:
        ctx.sql("DELETE FROM events")
        refused = None
    except HookSqlError as error:
        refused = str(error)
    me = ctx.hook
    return HookResult(extracted={
        "rows": rows, "refused": refused, "name": me.name, "saved": dict(me.saved_state),
        "last": me.last_run.event_id, "last_result": dict(me.last_run.result),
    })
""",
    "quitter": """
HOOK = HookMeta(name="quitter")
def evaluate(ctx):
    sys.exit(3)
""",
}


@pytest.fixture
def hooks(tmp_path: Path) -> dict[str, LoadedHook]:
    directory = tmp_path / "hooks"
    directory.mkdir()
    for name, source in HOOKS.items():
        (directory / f"{name}.py").write_text(HEADER + source)
    report = load_hooks(directory)
    assert report.problems == ()
    return {hook.meta.name: hook for hook in report.hooks}


@pytest.fixture
def pool() -> Iterator[HookPool]:
    hook_pool = HookPool(size=2, memory_mb=256)
    yield hook_pool
    hook_pool.close()


def _event(event_id: str, text: str) -> EventRecord:
    return EventRecord(
        id=event_id, adapter="api", platform="api", kind="message", direction="inbound",
        source=None, space=None, sender_id="u1", sender_name="Ada", contact_id=None,
        container_kind=None, container_id=None, platform_thread_id=None, text=text,
        reply_to=None, message_id=None, occurred_at=T0, received_at=T0, status="received",
        disposition=None, disposition_detail=None,
    )  # fmt: skip


def _context_for(text: str = "hi", state: dict[str, Any] | None = None) -> Any:
    def context(hook: LoadedHook) -> HookContext:
        return HookContext(
            event=_event("e1", text),
            now_ms=T0,
            minute_ms=T0 - 60_000,
            state=dict(state or {"gone": 1}),
            search_events=lambda query, limit: [_event(f"s:{query}:{limit}", "found")],
            recent_events=lambda limit: [_event(f"r:{n}", "recent") for n in range(limit)],
            llm=lambda prompt: f"model says: {prompt}",
            sql=_sql,
            about_hook=lambda: HookInfo(
                name=hook.meta.name,
                registered=True,
                saved_state={"before": 1},
                last_run=LastRun("e0", T0 - 1, 3, True, {"fire": True}, None),
            ),
        )

    return context


def _sql(query: str, params: Any = None) -> list[dict[str, Any]]:
    if not query.startswith("SELECT"):
        raise HookSqlError("SQL for hooks is read-only: DELETE is not allowed")
    return [{"query": query, "params": params}]


def _run(pool: HookPool | None, *chosen: LoadedHook, text: str = "hi") -> list[Invocation]:
    return evaluate_all(list(chosen), _context_for(text), now_ms=lambda: T0, pool=pool)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_a_hook_that_loops_forever_is_killed_at_its_timeout_and_the_pool_refilled(
    hooks: dict[str, LoadedHook], pool: HookPool, tmp_path: Path
) -> None:
    _run(pool, hooks["quick"], hooks["quick"])  # both processes started and ready
    pids = tmp_path / "pids"
    before = _threads()
    started = time.monotonic()
    forever, quick = _run(pool, hooks["forever"], hooks["quick"], text=str(pids))
    assert time.monotonic() - started < 1.5
    assert forever.error == "timed out after 0.5 s" and not forever.fired
    assert quick.fired and quick.error is None
    hook_pid, helper_pid = (int(pid) for pid in pids.read_text().split())
    # Killed with what it started; the thread that served it ends as it sees it die.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and (_alive(helper_pid) or _threads() - before):
        time.sleep(0.02)
    assert not _alive(hook_pid) and not _alive(helper_pid)
    assert not _threads() - before
    assert pool.idle() == 2  # a replacement took the killed process's place
    started = time.monotonic()
    (after,) = _run(pool, hooks["quick"])
    assert after.fired and time.monotonic() - started < 0.2


def test_a_hook_that_allocates_without_bound_is_stopped_by_the_memory_limit(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    started = time.monotonic()
    (hungry,) = _run(pool, hooks["hungry"])
    assert time.monotonic() - started < 10.0  # its memory stopped it, not its 30 s timeout
    assert hungry.error == "MemoryError: over the hook memory limit of 256 MiB"
    assert pool.idle() == 1  # replaced: its heap was left at the limit
    (quick,) = _run(pool, hooks["quick"])
    assert quick.fired


def test_a_hook_cannot_read_the_workers_secrets_from_its_environment(
    hooks: dict[str, LoadedHook], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXUS_ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("NEXUS_DATABASE_URL", "postgresql://nexus:pw@db/nexus")
    monkeypatch.setenv("INVOICES_API_KEY", "allowed")
    hook_pool = HookPool(size=1, env_names=["INVOICES_API_KEY"])
    try:
        (nosy,) = _run(hook_pool, hooks["nosy"])
    finally:
        hook_pool.close()
    assert nosy.result is not None
    seen: dict[str, str] = nosy.result.extracted["env"]
    assert "sk-ant-secret" not in seen.values() and "NEXUS_DATABASE_URL" not in seen
    assert not [name for name in seen if name.startswith("NEXUS_")]
    assert seen["INVOICES_API_KEY"] == "allowed" and "PATH" in seen


def test_results_state_lookups_and_errors_are_the_same_as_on_threads(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    chosen = [hooks[name] for name in ("router", "raiser", "nonsense", "quick")]

    def outcome(invocations: list[Invocation]) -> list[tuple[Any, ...]]:
        return [(i.error, i.result, i.state, i.fired) for i in invocations]

    in_processes = outcome(_run(pool, *chosen, text="invoice 7"))
    assert in_processes == outcome(_run(None, *chosen, text="invoice 7"))
    router, raiser, nonsense, _ = in_processes
    assert router[1].prompt == "model says: classify invoice 7"
    assert router[1].routing.queue_mode == "collect" and router[1].routing.target == "finance"
    assert router[1].extracted == {
        "found": ["s:invoice:5", "r:0", "r:1"],
        "minute": T0 - 60_000,
        "now": T0,
    }
    assert router[2] == {"seen": 1}
    assert raiser[:3] == ("KeyError: 'oops'", None, {"gone": 1, "tried": True})
    assert nonsense[0] == "TypeError: evaluate returned str, not HookResult"


def test_sql_and_what_a_hook_knows_of_itself_are_asked_of_the_worker(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    (in_process,) = _run(pool, hooks["self_aware"])
    (on_thread,) = _run(None, hooks["self_aware"])
    assert in_process.error is None and in_process.result is not None
    assert (in_process.result, in_process.error) == (on_thread.result, on_thread.error)
    assert in_process.result.extracted == {
        "rows": [{"query": "SELECT :n AS n", "params": {"n": 3}}],
        "refused": "SQL for hooks is read-only: DELETE is not allowed",
        "name": "self_aware",
        "saved": {"before": 1},
        "last": "e0",
        "last_result": {"fire": True},
    }


def test_a_hook_asks_the_worker_only_for_what_a_hook_may_have(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    (greedy,) = _run(pool, hooks["greedy"])
    assert greedy.result is not None
    assert greedy.result.prompt == "ValueError: limit must be between 1 and 1000"


def test_what_json_cannot_hold_is_an_error_of_that_call_not_a_lost_batch(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    unsaveable, unstorable = _run(pool, hooks["unsaveable"], hooks["unstorable"])
    assert unsaveable.error is not None and unsaveable.error.startswith("TypeError")
    assert unsaveable.state == {"gone": 1} and not unsaveable.fired  # as it was sent
    assert unstorable.error is not None and "the result is not JSON" in unstorable.error
    assert unstorable.state == {"gone": 1, "seen": 1}


def test_a_hook_that_exits_is_an_error_and_its_process_replaced(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    quitter, quick = _run(pool, hooks["quitter"], hooks["quick"])
    assert quitter.error == "SystemExit: 3" and quick.fired
    assert [i.fired for i in _run(pool, hooks["quick"], hooks["quick"])] == [True, True]


def test_a_forked_child_starts_its_own_processes_and_leaves_its_parents_alone(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    (first,) = _run(pool, hooks["quick"])
    assert first.fired
    child = os.fork()
    if child == 0:  # a Celery prefork child: same pool object, inherited from its parent
        try:
            (inherited,) = _run(pool, hooks["quick"])
            pool.close()
            os._exit(0 if inherited.fired else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    started = time.monotonic()
    (again,) = _run(pool, hooks["quick"])  # the parent's ready process is still there
    assert again.fired and time.monotonic() - started < 0.2


def test_closing_stops_every_process_and_the_next_call_starts_new_ones(
    hooks: dict[str, LoadedHook], pool: HookPool
) -> None:
    _run(pool, hooks["quick"], hooks["quick"])
    assert pool.idle() == 2
    pool.close()
    assert pool.idle() == 0
    (quick,) = _run(pool, hooks["quick"])
    assert quick.fired and pool.idle() == 1
