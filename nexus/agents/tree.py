"""A session's turn tree as data: the chain, compactions, and the workers and forks that
branch off each turn (`nexus tree`, GET /v1/sessions/{label}/tree)."""

from __future__ import annotations

from typing import Any

from nexus.ledger.enums import MessageRole, TurnType
from nexus.ledger.records import TurnView
from nexus.ledger.repository import Ledger, NotFound

_PREVIEW = 60
_SUMMARY_LINE = 200


def _first(view: TurnView, role: MessageRole) -> str | None:
    for message in view.messages:
        if message.role == role and message.content.get("text"):
            text = str(message.content["text"])
            return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"
    return None


def _thinking(view: TurnView) -> str | None:
    """The turn's first extended thinking, shortened (redacted thinking has no text)."""
    for message in view.messages:
        for block in message.content.get("thinking") or ():
            if isinstance(block, dict) and (text := str(block.get("thinking") or "").strip()):
                first = " ".join(text.split())
                return first if len(first) <= _PREVIEW else first[: _PREVIEW - 1] + "…"
    return None


def _summary_line(view: TurnView) -> str | None:
    """A compaction turn's summary (its one system message), first line only."""
    if view.turn.turn_type != TurnType.COMPACTION:
        return None
    for message in view.messages:
        if message.role == MessageRole.SYSTEM and (text := str(message.content.get("text", ""))):
            first = text.strip().splitlines()[0] if text.strip() else ""
            return first if len(first) <= _SUMMARY_LINE else first[: _SUMMARY_LINE - 1] + "…"
    return None


def session_tree(ledger: Ledger, label: str) -> dict[str, Any]:
    # A deleted session's tree stays readable under its label until a new session takes it.
    session = ledger.sessions.resolve(label) or ledger.sessions.get_by_label(label)
    if session is None:
        raise NotFound(f"no session labelled {label!r}")
    chain = ledger.threads.read_ancestry(session.thread_id) if session.thread_id else []
    branches = ledger.sessions.branches_from([view.turn.id for view in chain])
    # The heads rollbacks left behind, drawn where the session went back to.
    abandoned: dict[str, list[str]] = {}
    for turn_id, head in ledger.sessions.rollbacks(session.id):
        abandoned.setdefault(turn_id, []).append(head)
    turns = []
    for view in chain:
        turns.append(
            {
                "id": view.turn.id,
                "session": "this" if view.turn.session_id == session.id else view.turn.session_id,
                "type": view.turn.turn_type.value,
                "status": view.turn.status.value,
                "query": _first(view, MessageRole.USER),
                "answer": _first(view, MessageRole.ASSISTANT),
                "thinking": _thinking(view),
                "summary": _summary_line(view),
                "branches": [
                    {"kind": kind, "session": branch.label, "task": branch.task_description}
                    for turn_id, kind, branch in branches
                    if turn_id == view.turn.id
                ]
                + [
                    {"kind": "abandoned", "session": session.label, "task": None, "head": head}
                    for head in abandoned.get(view.turn.id, [])
                ],
            }
        )
    return {
        "session": session.label,
        "parent": session.parent_session_label,
        "parent_turn": session.parent_turn_id,
        "head": session.thread_id,
        "turns": turns,
    }
