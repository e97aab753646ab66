"""Lease keep-alive: one thread per process extends every lease a running turn holds."""

from __future__ import annotations

import multiprocessing
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from nexus.queueing.keepalive import KeepAlive


@dataclass
class CountingLease:
    """A lease that answers `extend` as told and counts the calls."""

    keep: bool = True
    extended: list[float] = field(default_factory=list)

    def extend(self) -> bool:
        self.extended.append(time.monotonic())
        return self.keep

    def release(self) -> None:
        return None


def _keepers() -> int:
    return sum(thread.name == "lease-keepalive" for thread in threading.enumerate())


def _until(done: Any, timeout_s: float = 5.0) -> bool:
    """Wait for `done()` (a loaded machine runs the keeper late, never never)."""
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)
    return bool(done())


def test_a_lease_is_extended_every_third_of_its_ttl_while_held() -> None:
    lease = CountingLease()
    with KeepAlive(lease, ttl_ms=150) as alive:
        time.sleep(0.33)
    assert 4 <= len(lease.extended) <= 7  # every 50 ms for 330 ms
    assert not alive.lost


def test_many_turns_keep_their_leases_on_one_thread() -> None:
    leases = [CountingLease() for _ in range(20)]
    alives = [KeepAlive(lease, ttl_ms=90) for lease in leases]
    for alive in alives:
        alive.__enter__()
    try:
        assert _until(lambda: all(lease.extended for lease in leases))
        assert _keepers() == 1
    finally:
        for alive in alives:
            alive.__exit__(None, None, None)


def test_nothing_is_extended_once_a_keep_alive_has_exited() -> None:
    lease = CountingLease()
    with KeepAlive(lease, ttl_ms=30):
        time.sleep(0.05)
    after = len(lease.extended)
    time.sleep(0.08)
    assert len(lease.extended) == after


def test_a_lease_lost_to_someone_else_is_no_longer_extended() -> None:
    lease = CountingLease(keep=False)
    with KeepAlive(lease, ttl_ms=30) as alive:
        assert _until(lambda: alive.lost)
        time.sleep(0.05)  # a few more intervals: none of them extends it again
    assert len(lease.extended) == 1


def test_a_failing_extension_is_tried_again_at_the_next_interval() -> None:
    calls: list[int] = []

    class Flaky(CountingLease):
        def extend(self) -> bool:
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("redis blinked")
            return True

    with KeepAlive(Flaky(), ttl_ms=30) as alive:
        assert _until(lambda: len(calls) >= 2)
    assert not alive.lost


def _extensions_in_child(ready: Any) -> None:
    lease = CountingLease()
    with KeepAlive(lease, ttl_ms=30):
        _until(lambda: len(lease.extended) >= 2)
        keepers = _keepers()
    ready.put((len(lease.extended), keepers))


def test_a_forked_child_keeps_its_leases_on_a_thread_of_its_own() -> None:
    # The parent's keeper runs (and may hold its lock) as the child forks, as a prefork
    # worker's pool process is forked from a main process that has kept leases.
    with KeepAlive(CountingLease(), ttl_ms=30):
        context = multiprocessing.get_context("fork")
        ready = context.Queue()
        child = context.Process(target=_extensions_in_child, args=(ready,))
        child.start()
        extended, keepers = ready.get(timeout=10)
        child.join(timeout=10)
    assert extended >= 2
    assert keepers == 1


def test_exiting_waits_for_a_hung_extension_only_so_long(monkeypatch: Any) -> None:
    # Redis not answering must not hold the session run past the bound: an extension that
    # lands after the release is refused by its token anyway.
    from nexus.queueing import keepalive

    monkeypatch.setattr(keepalive, "EXIT_WAIT_S", 0.1)
    entered, answer, answered = threading.Event(), threading.Event(), threading.Event()

    class Hung(CountingLease):
        def extend(self) -> bool:
            entered.set()
            answer.wait(timeout=5)
            answered.set()
            return True

    alive = KeepAlive(Hung(), ttl_ms=30)
    alive.__enter__()
    try:
        assert entered.wait(timeout=5)
        started = time.monotonic()
        alive.__exit__(None, None, None)
        assert time.monotonic() - started < 0.5
        assert not answered.is_set()  # it left while the extension still hung
    finally:
        answer.set()  # the keeper is free again for whatever runs next
        assert answered.wait(timeout=5)
