"""A reply leaves with its turn: the run that committed the turn sends it, on its own
thread, before it takes the next one.

The reply hook stores a turn's deliveries in the turn's transaction and, after the commit,
rings `nexus.delivery.send` for the first chunk as it always has: that task is the backup
(and the path of every retry). It also hands the chunks here, and when the thread that
committed the turn is holding (`holding`, around a session run's turn), the run sends them
itself once the turn is settled. Whichever of the two takes a chunk first sends it; the
other finds it taken (`begin_send` is a compare-and-set on the row), so it goes out once.

Why: a delivery task waits behind the session runs in the broker. A worker's threads, all
busy with back-to-back turns of a backlog, took a reply task only when a run ended, so
replies trailed their turns by minutes; sent here, a reply waits for nothing but its turn.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog

from nexus.outbound.service import DeliveryService, Outcome

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ReadyReply:
    """A committed turn's deliveries, in order, all for one platform."""

    chunk_ids: tuple[str, ...]
    platform: str


@dataclass
class InlineReplies:
    """One per process (the composition root builds it): the reply hook hands it what a
    commit stored, the session runner sends what its own thread committed."""

    service: DeliveryService
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def ready(self, chunk_ids: Sequence[str], platform: str) -> None:
        """After a turn's commit (the reply hook): kept for the run on this thread if it
        holds, else nothing (the task rung at commit sends it)."""
        held: list[ReadyReply] | None = getattr(self._local, "held", None)
        if held is not None and chunk_ids:
            held.append(ReadyReply(tuple(chunk_ids), platform))

    @contextmanager
    def holding(self) -> Iterator[list[ReadyReply]]:
        """Around a turn on this thread: collects the replies its commit stored."""
        held: list[ReadyReply] = []
        outer = getattr(self._local, "held", None)
        self._local.held = held
        try:
            yield held
        finally:
            self._local.held = outer

    def send(self, held: Sequence[ReadyReply]) -> list[Outcome]:
        """Send what a turn's commit stored, now, on this thread. Never raises: the turn is
        committed whatever happens here, and the task rung at its commit (or the retry a
        failed attempt rang) sends what this did not."""
        outcomes: list[Outcome] = []
        for reply in held:
            try:
                outcomes.extend(self.service.send_reply(reply.chunk_ids, reply.platform))
            except Exception:  # say, the database or Redis out of reach: the task sends it
                log.warning("reply_not_sent_inline", delivery_id=reply.chunk_ids[0], exc_info=True)
        return outcomes
