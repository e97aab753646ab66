"""One-shot scheduled: at 09:00 UTC on 1 December, remind once, then disable itself."""

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing
from nexus.ledger.enums import HookMode

HOOK = HookMeta(
    name="reminder-once",
    description="one reminder, then off",
    mode=HookMode.ONE_SHOT,
    schedule="0 9 1 12 *",
)


def evaluate(ctx: HookContext) -> HookResult:
    recent = ctx.search_events("invoice", 5)  # what was said about it lately
    return HookResult(
        fire=True,
        routing=Routing(kind="persona", target="atlas"),
        prompt=f"Reminder: the December invoice is due ({len(recent)} recent mentions).",
    )
