"""Capabilities: bundles of tools and prompt additions, applied in order (docs/engine.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

CapabilityStatus = Literal["available", "coming_soon", "deprecated"]
# What a capability is about, for grouping them where they are listed.
CATEGORIES = ("basics", "context", "agents", "messaging", "code", "web", "people", "files")


@dataclass(frozen=True)
class Capability:
    id: str
    name: str
    description: str
    status: CapabilityStatus
    prompt_addition: str = ""
    tool_names: tuple[str, ...] = ()
    icon: str | None = None  # an emoji shown beside the name
    category: str | None = None  # one of CATEGORIES, to group capabilities by


@dataclass(frozen=True)
class ResolvedCapabilities:
    prompt_additions: tuple[str, ...]
    tool_names: tuple[str, ...]


BUILTIN_CAPABILITIES = (
    Capability(
        "noop",
        "No-op",
        "No-op capability for testing",
        "available",
        "",
        ("noop",),
        icon="🔘",
        category="basics",
    ),
    Capability(
        "current_time",
        "Current time",
        "Tool to get current date/time",
        "available",
        "When the date or time matters, call current_time rather than guessing.",
        ("current_time",),
        icon="🕒",
        category="basics",
    ),
    Capability(
        "compaction",
        "Compaction",
        "Tool to compact the session's context on request",
        "available",
        "When the conversation grows long or turns to a new subject, you may call "
        "compact_context; the older turns are summarised once your answer is done.",
        ("compact_context",),
        icon="🗜️",
        category="context",
    ),
    Capability(
        "agents",
        "Agents",
        "Dispatch worker agents and message other sessions",
        "available",
        "You can hand work to worker agents with agent_send (op=dispatch); their results come "
        "back to you as [worker_result] messages. A worker reports with reply_to_caller.",
        ("agent_send", "reply_to_caller", "send_message_to_agent", "get_agent_status"),
        icon="🤝",
        category="agents",
    ),
    Capability(
        "rich_replies",
        "Rich replies",
        "Buttons and embeds on chat replies",
        "available",
        "When the person should pick from a few choices, or a link or card helps, call "
        "present_options before your final answer: its buttons and embeds go with that "
        "answer. A pressed button comes back to you as a message holding its value.",
        ("present_options",),
        icon="🔲",
        category="messaging",
    ),
    Capability(
        "reactions",
        "Reactions",
        "React to the message being answered (iMessage tapbacks)",
        "available",
        "You may react to the message you are answering with the react tool (a tapback: "
        "love, like, dislike, laugh, emphasize, question) where the platform shows "
        "reactions; a reaction alone, with NO_REPLY as your answer, is a fine reply.",
        ("react",),
        icon="💬",
        category="messaging",
    ),
    Capability(
        "research",
        "Research",
        "Deep research with scratchpad",
        "coming_soon",
        icon="🔎",
        category="web",
    ),
    Capability(
        "sandbox",
        "Sandbox",
        "Sandboxed code execution",
        "available",
        "You can run short Python programs with run_python (each run starts fresh, with a "
        "time and memory limit) when computing an answer beats guessing it.",
        ("run_python",),
        icon="🐍",
        category="code",
    ),
    Capability(
        "http",
        "HTTP fetch",
        "Fetch URLs, with the persona's credentials as bearer tokens",
        "available",
        "You can GET URLs with http_fetch; name a credential to authenticate with it.",
        ("http_fetch",),
        icon="🌐",
        category="web",
    ),
    Capability(
        "people",
        "People",
        "Merge person entities that are one person (needs permissions.people.merge)",
        "available",
        "When you learn that two of the people you talk with are one person (say, the same "
        "person on two channels), you may merge their entities with merge_people; their "
        "direct conversations then continue in one session.",
        ("merge_people",),
        icon="🧑‍🤝‍🧑",
        category="people",
    ),
    Capability(
        "file_system",
        "File system",
        "File system access tools",
        "coming_soon",
        icon="📁",
        category="files",
    ),
)


class CapabilityRegistry:
    def __init__(self, capabilities: Iterable[Capability] = BUILTIN_CAPABILITIES) -> None:
        self._by_id: dict[str, Capability] = {}
        for capability in capabilities:
            self.register(capability)

    def register(self, capability: Capability) -> None:
        if capability.id in self._by_id:
            raise ValueError(f"a capability {capability.id!r} is already registered")
        self._by_id[capability.id] = capability

    def get(self, capability_id: str) -> Capability:
        found = self._by_id.get(capability_id)
        if found is None:
            known = ", ".join(sorted(self._by_id))
            raise ValueError(f"unknown capability {capability_id!r} (known: {known})")
        return found

    def all(self) -> list[Capability]:
        return list(self._by_id.values())

    def resolve(self, ids_in_order: Sequence[str]) -> ResolvedCapabilities:
        """Prompt additions in the given order; tools deduplicated, first grant wins."""
        additions: list[str] = []
        tools: dict[str, None] = {}
        for capability_id in dict.fromkeys(ids_in_order):
            capability = self.get(capability_id)
            if capability.status == "coming_soon":
                raise ValueError(f"capability {capability_id!r} is not available yet")
            if capability.prompt_addition:
                additions.append(capability.prompt_addition)
            tools.update(dict.fromkeys(capability.tool_names))
        return ResolvedCapabilities(tuple(additions), tuple(tools))
