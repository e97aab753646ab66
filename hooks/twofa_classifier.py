"""Conditional LLM: a cheap pre-filter, then the model decides if it is a 2FA request."""

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing

HOOK = HookMeta(
    name="twofa-classifier", description="2FA code requests get priority", timeout_s=10.0
)


def evaluate(ctx: HookContext) -> HookResult:
    text = (ctx.event.text or "").lower()
    if "code" not in text:  # no model call for the obvious no
        return HookResult()
    verdict = ctx.llm(f"Is this message asking for a 2FA or login code? Answer yes or no.\n{text}")
    if not verdict.strip().lower().startswith("yes"):
        return HookResult()
    return HookResult(
        fire=True,
        routing=Routing(kind="persona", target="atlas"),
        prompt=f"Someone needs a login code: {ctx.event.text}",
    )
