"""The shipped example hooks load and behave as their patterns say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nexus.hooks.loader import LoadedHook, load_hooks
from nexus.hooks.spec import HookContext
from nexus.ledger.records import EventRecord

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_767_225_600_000


def _hooks() -> dict[str, LoadedHook]:
    report = load_hooks(ROOT / "hooks")
    assert report.problems == ()
    return {hook.meta.name: hook for hook in report.hooks}


def _event(**fields: Any) -> EventRecord:
    base: dict[str, Any] = dict(
        id="e",
        adapter="slack",
        platform="slack",
        kind="message",
        direction="inbound",
        source=None,
        space=None,
        sender_id="U1",
        sender_name="Ada",
        contact_id=None,
        container_kind="channel",
        container_id="C0OTHER",
        platform_thread_id=None,
        text="hi",
        reply_to=None,
        message_id=None,
        occurred_at=T0,
        received_at=T0,
        status="received",
        disposition=None,
        disposition_detail=None,
    )
    return EventRecord(**{**base, **fields})


def _ctx(event: EventRecord, *, llm: str = "no", minute: int | None = None) -> HookContext:
    return HookContext(
        event=event,
        now_ms=T0,
        minute_ms=minute,
        state={},
        search_events=lambda q, n: [],
        recent_events=lambda n: [],
        llm=lambda prompt: llm,
    )


def test_all_six_patterns_load() -> None:
    assert set(_hooks()) == {
        "heartbeat",
        "invoice-extraction",
        "reminder-once",
        "stripe-high-value",
        "twofa-classifier",
        "work-routing",
    }


def test_deterministic_routing() -> None:
    hook = _hooks()["work-routing"]
    assert not hook.evaluate(_ctx(_event())).fire
    fired = hook.evaluate(_ctx(_event(container_id="C0TEAM", text="deploy at 5")))
    assert fired.fire and fired.routing is not None and fired.routing.target == "work"


def test_heartbeat_counts_in_its_state() -> None:
    hook = _hooks()["heartbeat"]
    context = _ctx(_event(adapter="timer"), minute=T0)
    assert hook.evaluate(context).fire and context.state == {"beats": 1}
    assert hook.meta.schedule == "*/30 * * * *"


def test_webhook_filter_passes_only_large_payments() -> None:
    hook = _hooks()["stripe-high-value"]
    small = _event(adapter="webhook", text="payment 5000 received")
    large = _event(adapter="webhook", text="payment 250000 received")
    assert not hook.evaluate(_ctx(small)).fire
    result = hook.evaluate(_ctx(large))
    assert result.fire and result.extracted == {"amount_cents": 250000}


def test_llm_classifier_asks_the_model_only_when_worth_it() -> None:
    hook = _hooks()["twofa-classifier"]
    asked: list[str] = []

    def ctx(text: str, verdict: str) -> HookContext:
        context = _ctx(_event(text=text))
        context.llm = lambda prompt: asked.append(prompt) or verdict  # type: ignore[func-returns-value]
        return context

    assert not hook.evaluate(ctx("lunch at noon?", "yes")).fire and asked == []
    assert hook.evaluate(ctx("what's the amazon code?", "yes")).fire
    assert not hook.evaluate(ctx("zip code for the office?", "no")).fire
    assert len(asked) == 2


def test_one_shot_reminder_is_one_shot_and_scheduled() -> None:
    hook = _hooks()["reminder-once"]
    assert hook.meta.mode.value == "one-shot" and hook.meta.schedule == "0 9 1 12 *"
    assert hook.evaluate(_ctx(_event(adapter="timer"), minute=T0)).fire


def test_hybrid_filters_first_and_asks_the_model_only_to_extract() -> None:
    hook = _hooks()["invoice-extraction"]
    asked: list[str] = []
    answer = (
        "Here it is:\n```json\n"
        '{"vendor": "ACME", "amount": 1200.5, "currency": "USD", "due_date": "2026-02-01", '
        '"note": "dropped"}\n```'
    )

    def ctx(text: str, reply: str = answer, **fields: Any) -> HookContext:
        context = _ctx(_event(text=text, **fields))
        context.llm = lambda prompt: asked.append(prompt) or reply  # type: ignore[func-returns-value]
        return context

    # The deterministic pre-filter: no bill word, no amount, or not inbound: no model call.
    assert not hook.evaluate(ctx("lunch at noon? $12 each")).fire
    assert not hook.evaluate(ctx("the invoice template is in the drive")).fire
    assert not hook.evaluate(ctx("invoice for $1,200.50 sent", direction="outbound")).fire
    assert asked == []
    # What passes is read by the model, and its fields are what the hook extracts.
    fired = hook.evaluate(ctx("ACME invoice: $1,200.50 due Feb 1"))
    assert len(asked) == 1 and asked[0].endswith("ACME invoice: $1,200.50 due Feb 1")
    assert fired.fire and fired.routing is not None and fired.routing.target == "finance"
    assert fired.extracted == {
        "vendor": "ACME",
        "amount": 1200.5,
        "currency": "USD",
        "due_date": "2026-02-01",
    }
    # The model may still say no: then nothing fires.
    assert not hook.evaluate(ctx("pay the bill of 30 EUR to Bob", reply="null")).fire
    assert len(asked) == 2
