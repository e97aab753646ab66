"""Webhook filter: only Stripe payments above 1,000 (in the currency's unit) go on."""

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing

HOOK = HookMeta(name="stripe-high-value", description="large payments only")
THRESHOLD_CENTS = 100_000


def evaluate(ctx: HookContext) -> HookResult:
    event = ctx.event
    if event.adapter != "webhook" or not event.text or "payment" not in event.text.lower():
        return HookResult()
    amount = _amount(event.text)
    if amount is None or amount < THRESHOLD_CENTS:
        return HookResult()
    return HookResult(
        fire=True,
        routing=Routing(kind="session", target="finance"),
        prompt=f"A large payment arrived: {event.text}",
        extracted={"amount_cents": amount},
    )


def _amount(text: str) -> int | None:
    digits = [word for word in text.replace(",", "").split() if word.isdigit()]
    return int(digits[0]) if digits else None
