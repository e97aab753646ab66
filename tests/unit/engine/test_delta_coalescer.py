"""Stream deltas are joined per interval, and nothing is lost at the end of a stream."""

from __future__ import annotations

from nexus.engine.stream import DeltaCoalescer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_delta_goes_out_at_once_then_one_per_interval() -> None:
    clock = Clock()
    deltas = DeltaCoalescer(interval_s=0.05, clock=clock)
    assert deltas.add("Hel") == "Hel"  # a reader sees the answer start without waiting
    assert deltas.add("lo") is None
    clock.now += 0.03
    assert deltas.add(", ") is None
    clock.now += 0.03
    assert deltas.add("wor") == "lo, wor"
    assert deltas.add("ld") is None
    assert deltas.drain() == "ld"
    assert deltas.drain() is None


def test_a_stream_faster_than_the_interval_is_published_twice() -> None:
    deltas = DeltaCoalescer(interval_s=0.05, clock=Clock())
    published = [deltas.add(word) for word in ["one ", "two ", "three ", "four"]]
    published.append(deltas.drain())
    assert [text for text in published if text] == ["one ", "two three four"]
