"""Breaker transitions, timer minutes and cron, and parallel evaluation with timeouts."""

from __future__ import annotations

import time
from typing import Any

from nexus.hooks.breaker import COOL_DOWN_MS, Breaker, admit, record
from nexus.hooks.cron import MAX_CATCH_UP_MINUTES, MINUTE_MS, cron_matches, minutes_to_tick
from nexus.hooks.evaluator import evaluate_all
from nexus.hooks.loader import LoadedHook
from nexus.hooks.settle import Settled, merged_state, settle
from nexus.hooks.spec import HookContext, HookMeta, HookResult
from nexus.ledger.enums import BreakerState
from nexus.ledger.records import EventRecord, HookRecord

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def test_breaker_opens_after_five_errors_half_opens_after_five_minutes_and_closes() -> None:
    breaker = Breaker()
    for _ in range(4):
        breaker = record(breaker, ok=False, now_ms=T0)
        assert breaker.state == BreakerState.CLOSED
    breaker = record(breaker, ok=False, now_ms=T0)
    assert breaker.state == BreakerState.OPEN
    assert admit(breaker, T0 + COOL_DOWN_MS - 1) == (False, breaker)
    allowed, trial = admit(breaker, T0 + COOL_DOWN_MS)
    assert allowed and trial.state == BreakerState.HALF_OPEN
    failed_trial = record(trial, ok=False, now_ms=T0 + COOL_DOWN_MS)
    assert failed_trial.state == BreakerState.OPEN and failed_trial.opened_at == T0 + COOL_DOWN_MS
    assert record(trial, ok=True, now_ms=T0 + COOL_DOWN_MS) == Breaker()


def test_minutes_to_tick_catch_up_and_first_tick() -> None:
    assert minutes_to_tick(None, T0 + 5_000) == ([T0], 0)
    assert minutes_to_tick(T0, T0 + 59_999) == ([], 0)
    assert minutes_to_tick(T0, T0 + 3 * MINUTE_MS + 10) == (
        [T0 + MINUTE_MS, T0 + 2 * MINUTE_MS, T0 + 3 * MINUTE_MS],
        0,
    )
    late, skipped = minutes_to_tick(T0, T0 + 100 * MINUTE_MS)
    assert len(late) == MAX_CATCH_UP_MINUTES and skipped == 40
    assert late[-1] == T0 + 100 * MINUTE_MS


def test_cron_matches_minutes_in_utc() -> None:
    assert cron_matches("*/30 * * * *", T0) and cron_matches("*/30 * * * *", T0 + 30 * MINUTE_MS)
    assert not cron_matches("*/30 * * * *", T0 + MINUTE_MS)
    assert cron_matches("0 9 1 12 *", 1_796_115_600_000)  # 2026-12-01T09:00Z


def _hook(name: str, run: Any, timeout_s: float = 2.0) -> LoadedHook:
    return LoadedHook(HookMeta(name=name, timeout_s=timeout_s), run, f"{name}.py", "h")


def _context(hook: LoadedHook) -> HookContext:
    event = EventRecord(
        id="e1",
        adapter="api",
        platform="api",
        kind="message",
        direction="inbound",
        source=None,
        space=None,
        sender_id=None,
        sender_name=None,
        contact_id=None,
        container_kind=None,
        container_id=None,
        platform_thread_id=None,
        text="hi",
        reply_to=None,
        message_id=None,
        occurred_at=0,
        received_at=0,
        status="received",
        disposition=None,
        disposition_detail=None,
    )
    return HookContext(
        event=event,
        now_ms=T0,
        minute_ms=None,
        state={},
        search_events=lambda q, n: [],
        recent_events=lambda n: [],
        llm=lambda prompt: "no",
    )


def _sleeper(seconds: float) -> Any:
    def run(ctx: HookContext) -> HookResult:
        time.sleep(seconds)
        return HookResult(fire=True)

    return run


def test_three_300_ms_hooks_run_in_parallel() -> None:
    hooks = [_hook(f"h{n}", _sleeper(0.3)) for n in range(3)]
    started = time.monotonic()
    done = evaluate_all(hooks, _context, now_ms=lambda: T0)
    elapsed = time.monotonic() - started
    assert all(i.fired for i in done)
    assert elapsed < 0.6, f"took {elapsed:.3f} s: hooks did not run in parallel"


def test_a_hook_that_hangs_is_cut_at_its_timeout_and_others_still_count() -> None:
    hooks = [_hook("forever", _sleeper(3600), timeout_s=0.3), _hook("quick", _sleeper(0.01))]
    started = time.monotonic()
    hung, quick = evaluate_all(hooks, _context, now_ms=lambda: T0)
    assert time.monotonic() - started < 1.0
    assert hung.error == "timed out after 0.3 s" and not hung.fired
    assert quick.fired and quick.error is None


def test_a_hook_that_raises_or_returns_nonsense_is_an_error_not_a_crash() -> None:
    def broken(ctx: HookContext) -> HookResult:
        raise KeyError("oops")

    def wrong(ctx: HookContext) -> HookResult:
        return "fire"  # type: ignore[return-value]

    raised, nonsense = evaluate_all(
        [_hook("broken", broken), _hook("wrong", wrong)], _context, now_ms=lambda: T0
    )
    assert raised.error == "KeyError: 'oops'" and not raised.fired
    assert nonsense.error is not None and "not HookResult" in nonsense.error


def _row(**changes: Any) -> HookRecord:
    values: dict[str, Any] = {
        "name": "h", "path": "h.py", "description": "", "mode": "persistent",
        "schedule": None, "enabled": True, "content_hash": None, "breaker_state": "closed",
        "consecutive_errors": 0, "opened_at": None, "state": {}, "last_fired_at": None,
    }  # fmt: skip
    return HookRecord.model_validate({**values, **changes})


def _settle(now: HookRecord, **call: Any) -> Settled:
    given: dict[str, Any] = {
        "state_before": {}, "state_after": {}, "ok": True, "fired": False,
        "one_shot": False, "disable": False, "now_ms": T0,
    }  # fmt: skip
    return settle(now, **{**given, **call})


def test_settling_counts_errors_from_the_row_as_it_is_now() -> None:
    # Four other calls failed while this one ran: this failure is the fifth and opens it.
    settled = _settle(_row(consecutive_errors=4), ok=False)
    assert settled.breaker == Breaker(BreakerState.OPEN, 5, T0)
    cooled = _row(breaker_state="open", consecutive_errors=5, opened_at=T0 - COOL_DOWN_MS)
    assert _settle(cooled, ok=True).breaker == Breaker()  # the half-open trial succeeded


def test_a_hook_switched_off_while_it_ran_stays_off_and_does_not_fire() -> None:
    assert _settle(_row(), fired=True) == Settled(Breaker(), {}, enabled=True, fires=True)
    spent = _settle(_row(enabled=False), fired=True, one_shot=True)
    assert (spent.enabled, spent.fires) == (False, False)
    first = _settle(_row(), fired=True, one_shot=True)
    assert (first.enabled, first.fires) == (False, True)
    assert _settle(_row(), disable=True).enabled is False


def test_state_changes_apply_key_by_key_over_what_others_wrote() -> None:
    assert merged_state({"a": 1, "b": 2}, {"a": 5, "c": 3}, {"a": 1, "b": 2, "d": 4}) == {
        "a": 5,
        "c": 3,
        "d": 4,
    }
    assert merged_state({}, {}, {"kept": True}) == {"kept": True}
