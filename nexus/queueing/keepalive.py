"""Lease keep-alive: one thread per process extends every lease a running turn holds."""

from __future__ import annotations

import os
import threading
import time

import structlog

from nexus.queueing.coordination import Lease

log = structlog.get_logger(__name__)

# How long leaving a keep-alive waits for an extension under way (Redis not answering):
# one that lands after the release is refused by its token, so the run need not wait on.
EXIT_WAIT_S = 5.0


class KeepAlive:
    """Extends a lease every third of its TTL while a turn runs (a model call can outlast
    any fixed TTL). `lost` turns true if an extension is refused: the run goes on, and the
    epoch fence decides whether its commit still counts. The extending is done by the
    process's one keeper thread: a turn starts no thread of its own, which would cost its
    start a thread's creation and a wait for it to be scheduled."""

    def __init__(self, lease: Lease, ttl_ms: int) -> None:
        self.lease = lease
        self.every_s = ttl_ms / 3000
        self.lost = False

    def __enter__(self) -> KeepAlive:
        _KEEPER.hold(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _KEEPER.drop(self)


class _Keeper:
    """The leases held in this process, each with when it is next due; one daemon thread,
    started on first use (and again in a forked child, which inherits no threads)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: dict[KeepAlive, float] = {}
        self._extending: set[KeepAlive] = set()
        self._started_in: int | None = None

    def hold(self, alive: KeepAlive) -> None:
        with self._changed:
            if self._started_in != os.getpid():
                self._started_in = os.getpid()
                thread = threading.Thread(target=self._run, name="lease-keepalive", daemon=True)
                thread.start()
            self._due[alive] = time.monotonic() + alive.every_s
            self._changed.notify_all()

    def drop(self, alive: KeepAlive) -> None:
        """No extension of `alive` starts once this returns, and one under way is waited
        for (up to EXIT_WAIT_S): the caller releases the lease next."""
        with self._changed:
            self._due.pop(alive, None)
            self._changed.wait_for(lambda: alive not in self._extending, timeout=EXIT_WAIT_S)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                due = [alive for alive, at in self._due.items() if at <= now]
                if not due:
                    nearest = min(self._due.values(), default=None)
                    self._changed.wait(None if nearest is None else nearest - now)
                    continue
                for alive in due:
                    self._due[alive] = now + alive.every_s
                self._extending.update(due)
            try:
                for alive in due:
                    self._extend(alive)
            finally:
                with self._changed:
                    self._extending.difference_update(due)
                    self._changed.notify_all()

    def _extend(self, alive: KeepAlive) -> None:
        try:
            kept = alive.lease.extend()
        except Exception:
            # Redis did not answer: the lease may still be ours, so try again next time.
            log.warning("lease_extend_failed", exc_info=True)
            return
        if not kept:
            alive.lost = True
            with self._changed:
                self._due.pop(alive, None)


_KEEPER = _Keeper()


def _forget_in_child() -> None:
    # A forked child has none of its parent's threads, and maybe a lock its keeper held.
    global _KEEPER
    _KEEPER = _Keeper()


os.register_at_fork(after_in_child=_forget_in_child)
