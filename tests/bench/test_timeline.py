"""The timeline's stage table (`python -m bench.timeline`): stages in the order they come,
each a median from the POST and a step from the one before."""

from __future__ import annotations

from bench.timeline import _entries, stages


def test_stages_are_medians_in_order_with_their_steps() -> None:
    samples = [
        [("webhook answered", 5.0), ("queue.item.queued", 9.0), ("turn.committed", 17.0)],
        [("webhook answered", 6.0), ("queue.item.queued", 10.0), ("turn.committed", 15.0)],
        [("webhook answered", 4.0), ("queue.item.queued", 11.0), ("turn.committed", 16.0)],
    ]
    assert stages(samples) == [
        {"stage": "webhook answered", "ms": 5.0, "step_ms": 5.0},
        {"stage": "queue.item.queued", "ms": 10.0, "step_ms": 5.0},
        {"stage": "turn.committed", "ms": 16.0, "step_ms": 6.0},
    ]


def test_a_stage_seen_twice_in_a_message_counts_at_its_first() -> None:
    marks = [("message.created", 12.0), ("message.created", 14.0), ("turn.committed", 14.0)]
    assert stages([marks])[0] == {"stage": "message.created", "ms": 12.0, "step_ms": 12.0}


def test_entries_are_timed_by_their_ids_and_the_commit_ends_the_read() -> None:
    found = [
        (
            b"stream:s",
            [
                (b"1000012-0", {b"type": b"session.started"}),
                (b"1000017-1", {b"type": b"turn.committed"}),
            ],
        )
    ]
    marks, last, done = _entries(found, posted_ms=1_000_000.0)
    assert marks == [("session.started", 12.0), ("turn.committed", 17.0)]
    assert last == b"1000017-1" and done
    assert _entries([], posted_ms=0.0) == ([], b"0-0", False)
