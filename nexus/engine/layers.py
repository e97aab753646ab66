"""Context layers: the system prompt as ordered blocks, stable first, with cache breakpoints.

Order (docs/engine.md "Context layers"): identity (the persona's name and soul), layer 1
the workspace (AGENTS.md and identity files), layer 2 the session's role (2A manager: how
replies go out and how to dispatch workers; 2B worker: the task and how to report),
capability prompt additions, then the tool list. All of these change only when the persona,
workspace files, capabilities or tools change, so the last of them carries a cache
breakpoint; what changes every turn (history and the new messages) comes after it. A second
breakpoint sits on the last message of history, so the next call reads the conversation so
far from the cache too.
"""

from __future__ import annotations

from collections.abc import Sequence

from nexus.engine.model import Block, ToolSpec
from nexus.ledger.records import AgentRecord, SessionRecord

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
# Blocks the API refuses a cache_control on (thinking is cached with its message instead).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def identity_layer(persona: AgentRecord) -> str:
    parts = [f"You are {persona.name}."]
    if persona.system_prompt.strip():
        parts.append(persona.system_prompt.strip())
    return "\n\n".join(parts)


def manager_layer(tool_names: Sequence[str]) -> str:
    """Layer 2A: a session that answers people (or other sessions) directly."""
    lines = [
        "[Your role: manager agent]",
        "Your answer is your reply: Nexus sends it to the channel the last message came "
        "from (the same chat, thread or API caller). Write it for the people there; do not "
        "add reply tags or say where it goes.",
        "A message may begin with an [event] line: when, where and from whom it came. "
        "[worker_result] messages are your workers' results, not a person speaking.",
    ]
    if "agent_send" in tool_names:
        lines.append(
            "For work that takes many steps or can run in parallel, dispatch a worker with "
            'agent_send (op "dispatch", text: the whole task, self-contained). A worker has '
            "your persona (identity and permissions) unless you name another (persona); its "
            "result comes back to you as a [worker_result] message, so reply to the person "
            "then."
        )
    if "get_agent_status" in tool_names:
        lines.append("get_agent_status shows where a worker stands.")
    if "send_message_to_agent" in tool_names:
        lines.append("send_message_to_agent queues a message to another session by label.")
    return "\n".join(lines)


def worker_layer(session: SessionRecord, tool_names: Sequence[str]) -> str:
    """Layer 2B: a worker dispatched with a task; its answers go to its manager."""
    manager = session.parent_session_label or "your manager"
    task = (session.task_description or "").strip() or "(the first message below)"
    lines = [
        "[Your role: worker agent]",
        f"You were dispatched by {manager} with this task:",
        task,
        "Work on it until it is done, using every tool you have. Your final answer is your "
        "result: it goes to your manager, not to a person, so make it complete and "
        "self-contained. Say plainly if the task cannot be done, and why.",
    ]
    if "reply_to_caller" in tool_names:
        lines.append(
            "To report before you finish, call reply_to_caller with the result; a result "
            "is delivered once per turn."
        )
    return "\n".join(lines)


def role_layer(session: SessionRecord | None, tool_names: Sequence[str]) -> str:
    if session is not None and session.is_subagent:
        return worker_layer(session, tool_names)
    return manager_layer(tool_names)


def tools_layer(tools: Sequence[ToolSpec]) -> str:
    if not tools:
        return "You have no tools in this conversation."
    return "Tools you may use: " + ", ".join(tool.name for tool in tools) + "."


def system_blocks(
    *,
    persona: AgentRecord,
    session: SessionRecord | None,
    workspace: str,
    prompt_additions: Sequence[str],
    tools: Sequence[ToolSpec],
) -> tuple[Block, ...]:
    """The system prompt's blocks in layer order; the last one is the cache breakpoint."""
    names = [tool.name for tool in tools]
    texts = [
        identity_layer(persona),
        workspace.strip(),
        role_layer(session, names),
        *(addition.strip() for addition in prompt_additions),
        tools_layer(tools),
    ]
    blocks: list[Block] = [{"type": "text", "text": text} for text in texts if text]
    blocks[-1] = {**blocks[-1], "cache_control": dict(CACHE_CONTROL)}
    return tuple(blocks)


def mark_last_block(blocks: Sequence[Block]) -> list[Block]:
    """A copy of `blocks` whose last markable block carries a cache breakpoint.

    Copies, never changes in place: history blocks are shared with the context cache's
    memo of each turn. Blocks with nothing markable come back as they were.
    """
    marked = list(blocks)
    for position in range(len(marked) - 1, -1, -1):
        if marked[position].get("type") not in _UNMARKABLE:
            marked[position] = {**marked[position], "cache_control": dict(CACHE_CONTROL)}
            break
    return marked
