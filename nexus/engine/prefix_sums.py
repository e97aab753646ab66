"""Sums over a request's messages that cost only what is new since the conversation's last."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Message = Mapping[str, Any]

# Conversations remembered, and messages held across them (the oldest conversation goes
# first): each holds references to its messages' content lists, so both are bounded, like
# the context cache's sessions and turns (64, and 2,000 turns of about two messages each),
# so as not to keep alive what the cache has let go.
DEFAULT_CONVERSATIONS = 64
DEFAULT_MESSAGES = 5_000


@dataclass(frozen=True)
class _Sums:
    """One conversation's last request: each message's content list, role and key count,
    and the running sum through each message."""

    contents: tuple[object, ...]
    shapes: tuple[object, ...]
    running: tuple[int, ...]


def _shape(message: Message) -> object:
    """What, besides its content list, a message's measure depends on: its role, for the
    plain `{role, content}` shape; anything else is never taken as shared (a new object,
    equal to none)."""
    return message.get("role") if len(message) == 2 else object()


class PrefixSums:
    """`total(messages)` is `sum(measure(m) for m in messages)`, with `measure` called only
    for the messages after the longest prefix shared with the last request of the same
    conversation (keyed by its first message's content list).

    A turn's requests, and the next turn's, repeat the history before them: the context
    cache hands out the same content lists turn after turn (copying a message's dict, never
    changing a list it has handed out), so a shared prefix is found by identity, message by
    message, and a measure over the whole history is paid once, not on every model call.
    A message counts as shared only if it has the plain `{role, content}` shape, its content
    is the same object, its role the same, and it is at the same place, after a prefix that
    is shared too: anything else is measured again."""

    def __init__(
        self,
        measure: Callable[[Message], int],
        *,
        conversations: int = DEFAULT_CONVERSATIONS,
        messages: int = DEFAULT_MESSAGES,
    ) -> None:
        self._measure = measure
        self._conversations = conversations
        self._messages = messages
        self._held = 0
        self._last: OrderedDict[int, _Sums] = OrderedDict()
        self._lock = threading.Lock()  # `nexus dev` runs turns on several threads
        self.measured = 0  # calls to `measure`: what the sharing saves is visible

    def total(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        contents = tuple(message.get("content") for message in messages)
        shapes = tuple(map(_shape, messages))
        key = id(contents[0])
        with self._lock:
            last = self._last.get(key)
        shared = 0
        if last is not None and last.contents[0] is contents[0]:
            for new, old, shape, old_shape in zip(
                contents, last.contents, shapes, last.shapes, strict=False
            ):
                if new is not old or shape != old_shape:
                    break
                shared += 1
        running = list(last.running[:shared]) if last is not None else []
        total = running[-1] if running else 0
        for message in messages[shared:]:
            total += self._measure(message)
            running.append(total)
        self.measured += len(messages) - shared
        self._remember(key, _Sums(contents, shapes, tuple(running)))
        return total

    def _remember(self, key: int, sums: _Sums) -> None:
        with self._lock:
            replaced = self._last.pop(key, None)
            if replaced is not None:
                self._held -= len(replaced.contents)
            if len(sums.contents) > self._messages:
                return  # longer than everything held together: not kept
            self._last[key] = sums
            self._held += len(sums.contents)
            while len(self._last) > self._conversations or self._held > self._messages:
                _, evicted = self._last.popitem(last=False)
                self._held -= len(evicted.contents)
