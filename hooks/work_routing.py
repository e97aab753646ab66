"""Deterministic routing: messages in the team's Slack channel go to the `work` session."""

from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing

HOOK = HookMeta(name="work-routing", description="team channel -> work session")
WORK_CHANNEL = "C0TEAM"


def evaluate(ctx: HookContext) -> HookResult:
    event = ctx.event
    if event.platform != "slack" or event.container_id != WORK_CHANNEL:
        return HookResult()
    return HookResult(
        fire=True,
        routing=Routing(kind="session", target="work"),
        prompt=f"Work channel: {event.sender_name or event.sender_id} said: {event.text}",
    )
