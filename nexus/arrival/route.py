"""route(): resolve a target to the session whose head a new turn will extend.

Thread routing is the primitive (docs/engine.md, "Forks and routing"): a thread is a turn;
if a session's head is that turn the turn continues it, otherwise continuing from there is
a branch, so a fork session is created with the turn as its head. Session routing follows
labels and aliases; persona routing goes to the persona's main session; smart routing
searches what was said (`nexus.arrival.smart`) and falls back to the target it was given —
or, given content alone, finds its session or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nexus.access.keys import system_key
from nexus.arrival.smart import PER_TERM, best, query_terms
from nexus.ledger.enums import SessionOrigin
from nexus.ledger.records import NewSession, SessionRecord
from nexus.ledger.repository import Ledger, NotFound

TargetKind = Literal["thread", "session", "persona"]


@dataclass(frozen=True)
class RouteTarget:
    kind: TargetKind
    value: str  # a turn id, a session label, or a persona name
    smart: bool = False


@dataclass(frozen=True)
class Routed:
    session: SessionRecord
    how: str  # head | fork | label | alias | persona | created | smart
    score: float | None = None  # smart only: the share of the content's terms matched
    matched_terms: tuple[str, ...] = ()
    matched_turn_id: str | None = None  # smart only: the newest turn that matched


def persona_session_label(persona_name: str) -> str:
    return system_key(f"persona:{persona_name}")


def route(
    ledger: Ledger,
    target: RouteTarget | None,
    *,
    text: str | None = None,
    source_event_id: str | None = None,
) -> Routed:
    """The session a turn for `target` goes to; `smart` (or no target: content alone)
    prefers the session whose messages match the content best. With no target and no
    match, NotFound: there is nowhere to go. A persona's main session, created here, is
    Nexus's own (origin `system`), from `source_event_id` when an event asked for it."""
    if (target is None or target.smart) and text:
        found = _smart(ledger, text)
        if found is not None:
            return found
    if target is None:
        raise NotFound(
            "nothing said so far matches the content; name a thread, session or persona "
            "to fall back to"
        )
    if target.kind == "thread":
        return _thread(ledger, target.value)
    if target.kind == "session":
        return _session(ledger, target.value)
    return _persona(ledger, target.value, source_event_id)


def _smart(ledger: Ledger, text: str) -> Routed | None:
    terms = query_terms(text)
    match = best(terms, ledger.search.recent_hits(terms, per_term=PER_TERM))
    session = ledger.sessions.get(match.session_id) if match is not None else None
    if match is None or session is None:
        return None
    return Routed(session, "smart", match.score, match.matched_terms, match.turn_id)


def _thread(ledger: Ledger, turn_id: str) -> Routed:
    found = ledger.sessions.headed_by(turn_id)
    if found is not None:
        return Routed(found, "head")
    return Routed(ledger.sessions.fork(turn_id), "fork")


def _session(ledger: Ledger, label: str) -> Routed:
    found = ledger.sessions.resolve(label)
    if found is None:
        raise NotFound(f"no session labelled {label!r} (nor an alias of one)")
    return Routed(found, "label" if found.label == label else "alias")


def _persona(ledger: Ledger, persona_name: str, source_event_id: str | None) -> Routed:
    persona = ledger.agents.get_by_name(persona_name)
    if persona is None:
        raise NotFound(f"no persona named {persona_name!r}")
    label = persona_session_label(persona_name)
    found = ledger.sessions.resolve(label)
    if found is not None:
        return Routed(found, "persona")
    created = ensure_labelled(ledger, label, persona.id, SessionOrigin.SYSTEM, source_event_id)
    return Routed(created, "created")


def ensure_labelled(
    ledger: Ledger,
    label: str,
    persona_id: str,
    origin: SessionOrigin,
    source_event_id: str | None,
) -> SessionRecord:
    """The session `label` (aliases followed), else a new one under it, routed by that
    label and made by the event `source_event_id` (safe when racing)."""
    return ledger.sessions.ensure(
        NewSession(
            label=label,
            persona_id=persona_id,
            origin=origin,
            routing_key=label,
            source_event_id=source_event_id,
        )
    )
