"""The context each session had when this process last read it, so the next read extends it."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

from nexus.engine.context import (
    Messages,
    Pieces,
    TurnRenderer,
    history_messages,
    turn_pieces,
    with_pieces,
)
from nexus.ledger.enums import TurnType
from nexus.ledger.records import ContextRead, TurnView

DEFAULT_SESSIONS = 64
# Turns held across all sessions: a context grows until its next compaction, so a count of
# sessions alone would let a worker's memory grow with its sessions' histories.
DEFAULT_TURNS = 2_000


@dataclass(frozen=True)
class _Merged:
    """A context's history as messages, and which context that was (its anchor, the key, says
    which compaction it starts from)."""

    turn_count: int
    last_turn_id: str | None
    messages: Messages


class ContextCache:
    """The last context read per session, for the `sessions` most recently used and at most
    `turns` turns in all (the least recently used go first; a context longer than that is
    not kept).

    Safe because turns never change once committed (docs/architecture.md, invariant 5): a
    context read at turn T is the context at T for good. The ledger decides, on every read,
    whether the session's head still descends from it; a cached context is never trusted
    for which turn is the head. `sessions=0` keeps nothing.
    """

    def __init__(self, sessions: int = DEFAULT_SESSIONS, *, turns: int = DEFAULT_TURNS) -> None:
        self._sessions = sessions
        self._turns = turns
        self._held = 0
        self._contexts: OrderedDict[str, ContextRead] = OrderedDict()
        # Each turn rendered for the model once, not once per later turn of its session.
        self._rendered: OrderedDict[str, Pieces] = OrderedDict()
        # Per anchor (a compaction, or a chain's root): the last history merged into messages,
        # which the next context on that anchor extends by its new turns.
        self._merged: OrderedDict[str, _Merged] = OrderedDict()
        self._merged_turns = 0  # the turns those histories hold, bounded like `_held`
        self._lock = Lock()  # `nexus dev` runs turns on several threads

    def get(self, session_id: str) -> ContextRead | None:
        with self._lock:
            found = self._contexts.get(session_id)
            if found is not None:
                self._contexts.move_to_end(session_id)
            return found

    def put(self, session_id: str, context: ContextRead) -> None:
        with self._lock:
            replaced = self._contexts.pop(session_id, None)
            if replaced is not None:
                self._held -= len(replaced.turns)
            if self._sessions <= 0 or context.head is None or len(context.turns) > self._turns:
                return
            self._contexts[session_id] = context
            self._held += len(context.turns)
            while len(self._contexts) > self._sessions or self._held > self._turns:
                _, evicted = self._contexts.popitem(last=False)
                self._held -= len(evicted.turns)

    def advance(self, session_id: str, view: TurnView) -> None:
        """The session's context plus a turn this process just committed on its head, so the
        next read of the session finds it known instead of reading it back. Only a normal
        turn on the cached head extends it (a compaction starts a new context: read it)."""
        with self._lock:
            known = self._contexts.get(session_id)
        head = known.head if known is not None else None
        if (
            known is None
            or head is None
            or view.turn.turn_type != TurnType.NORMAL
            or view.turn.parent_turn_id != head.turn_id
        ):
            return
        # The head as the thread row will read (the read itself hands out the stored row).
        moved = head.model_copy(
            update={
                "turn_id": view.turn.id,
                "parent_turn_id": head.turn_id,
                "depth": head.depth + 1,
                "total_tokens": head.total_tokens + (view.turn.total_tokens or 0),
            }
        )
        turns = (*known.turns, view)
        self.put(session_id, known.model_copy(update={"head": moved, "turns": turns}))

    def rendered(self, view: TurnView) -> Pieces:
        """`turn_pieces(view)`, computed once per turn while it is among the `turns` most
        recently rendered."""
        turn_id = view.turn.id
        with self._lock:
            found = self._rendered.get(turn_id)
            if found is not None:
                self._rendered.move_to_end(turn_id)
                return found
        pieces = turn_pieces(view)
        if self._sessions > 0:
            with self._lock:
                self._rendered[turn_id] = pieces
                while len(self._rendered) > self._turns:
                    self._rendered.popitem(last=False)
        return pieces

    def merged(self, context: ContextRead, render: TurnRenderer) -> Messages:
        """`history_messages(context, render)`, extended from the last context merged on the
        same anchor when this one continues it (a context is a path from its anchor, the
        compaction or root it starts from: the same turn at the same place means the same
        turns before it)."""
        if context.head is None or self._sessions <= 0:
            return history_messages(context, render)
        anchor = context.head.anchor_turn_id
        with self._lock:
            known = self._merged.get(anchor)
        turns = context.turns
        if (
            known is not None
            and known.messages
            and 0 < known.turn_count <= len(turns)
            and turns[known.turn_count - 1].turn.id == known.last_turn_id
        ):
            added = [piece for view in turns[known.turn_count :] for piece in render(view)]
            messages = with_pieces(known.messages, added) if added else known.messages
        else:
            messages = history_messages(context, render)
        last = turns[-1].turn.id if turns else None
        with self._lock:
            replaced = self._merged.pop(anchor, None)
            if replaced is not None:
                self._merged_turns -= replaced.turn_count
            if len(turns) > self._turns:
                return messages  # too long to keep, as for the context itself
            self._merged[anchor] = _Merged(len(turns), last, messages)
            self._merged_turns += len(turns)
            while len(self._merged) > self._sessions or self._merged_turns > self._turns:
                _, evicted = self._merged.popitem(last=False)
                self._merged_turns -= evicted.turn_count
        return messages

    @property
    def merged_turns_held(self) -> int:
        return self._merged_turns

    @property
    def turns_held(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._contexts)
