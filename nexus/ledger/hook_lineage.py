"""Which events owe the hooks an evaluation, and the hook lineage an event carries (pure).

Every inbound event owes the hooks an evaluation, except the events hooks fire (adapter
`hook`): the obligation is written with the event (`HookObligation`). An event caused,
through a turn, by a hook's firing carries that hook's name in its payload's
`hook_lineage`, and a hook never evaluates an event of its own lineage: an agent's answer
to a firing cannot fire the same hook again, and a chain of events caused by firings
involves each hook at most once, so it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

HOOK_ADAPTER = "hook"  # the adapter of an event a hook fired
# The only events that carry a lineage: those hooks fire and agents post
# (`nexus.agents.posting.AGENT`).
CARRIERS = (HOOK_ADAPTER, "agent")
LINEAGE = "hook_lineage"  # the payload key: the hooks whose firings caused the event


def owes_hooks(adapter: str, direction: str) -> bool:
    """Whether an event stored with this adapter and direction owes the hooks an
    evaluation: every inbound event but those hooks fired (outbound ones are Nexus's own
    replies and notices)."""
    return direction == "inbound" and adapter != HOOK_ADAPTER


def lineage_of(adapter: str, payload: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The hooks whose firings caused this event (sorted, each once): the lineage it
    carries, and for an event a hook fired, that hook too. Only Nexus's own events carry
    one (`CARRIERS`): a platform's payload is what its sender wrote, never a lineage."""
    if adapter not in CARRIERS:
        return ()
    payload = payload or {}
    found = payload.get(LINEAGE)
    names = {name for name in found if isinstance(name, str)} if isinstance(found, list) else set()
    fired_by = payload.get("hook")
    if adapter == HOOK_ADAPTER and isinstance(fired_by, str):
        names.add(fired_by)
    return tuple(sorted(names))


def merged(lineages: Iterable[Iterable[str]]) -> list[str]:
    """One lineage from several (an event caused by a turn that answered several inputs)."""
    return sorted({name for lineage in lineages for name in lineage})
