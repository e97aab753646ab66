"""The context each session had when this process last read it, so the next read extends it."""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock

from nexus.ledger.records import ContextRead

DEFAULT_SESSIONS = 64


class ContextCache:
    """The last context read per session, for the `sessions` most recently used.

    Safe because turns never change once committed (DESIGN §1 rule 5): a context read at
    turn T is the context at T for good. The ledger decides, on every read, whether the
    session's head still descends from it; a cached context is never trusted for which
    turn is the head. `sessions=0` keeps nothing.
    """

    def __init__(self, sessions: int = DEFAULT_SESSIONS) -> None:
        self._sessions = sessions
        self._contexts: OrderedDict[str, ContextRead] = OrderedDict()
        self._lock = Lock()  # `nexus dev` runs turns on several threads

    def get(self, session_id: str) -> ContextRead | None:
        with self._lock:
            found = self._contexts.get(session_id)
            if found is not None:
                self._contexts.move_to_end(session_id)
            return found

    def put(self, session_id: str, context: ContextRead) -> None:
        if self._sessions <= 0 or context.head is None:
            return
        with self._lock:
            self._contexts[session_id] = context
            self._contexts.move_to_end(session_id)
            while len(self._contexts) > self._sessions:
                self._contexts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._contexts)
