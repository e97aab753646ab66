"""Interval schedule: every 30 minutes, the assistant checks in on open tasks."""

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing

HOOK = HookMeta(
    name="heartbeat", description="status check every 30 minutes", schedule="*/30 * * * *"
)


def evaluate(ctx: HookContext) -> HookResult:
    beats = int(ctx.state.get("beats", 0)) + 1
    ctx.state["beats"] = beats  # the hook's own state survives between calls
    return HookResult(
        fire=True,
        routing=Routing(kind="persona", target="atlas"),
        prompt=f"Heartbeat #{beats}: anything overdue or waiting on me?",
    )
