"""The pure parts of agent_send: reading a target, a label from a hint, where a tracked task
stands, and the cursor of the merged list of what a manager dispatched."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.agents.dispatch import BadTarget, Target, read_target
from nexus.agents.dispatched import _after, task_status
from nexus.agents.labels import FORK_PREFIX, WORKER_PREFIX, first_free, hinted_label
from nexus.ledger.records import check_new_label


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, Target("new_session")),
        (
            {"target": {"new_session": True}, "persona": "scout"},
            Target("new_session", persona="scout"),
        ),
        (
            {"target": {"new_session": {"persona": "scout", "labelHint": "flights"}}},
            Target("new_session", persona="scout", label_hint="flights"),
        ),
        ({"target": {"labelHint": "flights"}}, Target("new_session", label_hint="flights")),
        ({"target": {"session": "dm:ent_a"}}, Target("session", value="dm:ent_a")),
        (
            {"target": {"fork": "t1", "labelHint": "porto"}},
            Target("fork", value="t1", label_hint="porto"),
        ),
    ],
)
def test_targets_are_read_from_the_arguments(arguments: dict[str, Any], expected: Target) -> None:
    assert read_target({"op": "dispatch", "text": "x", **arguments}) == expected


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("worker", "must be an object"),
        ({"session": "a", "fork": "b"}, "session and fork"),
        ({"sesion": "a"}, "unknown keys ['sesion']"),
        ({"session": 3}, "session must be a string"),
        ({"fork": ""}, "must name a turn"),
        ({"session": "a", "labelHint": "b"}, "already has a label"),
        ({"fork": "t", "persona": "scout"}, "a fork keeps its turn's persona"),
        ({"new_session": {"labelHint": ["a"]}}, "labelHint must be a string"),
    ],
)
def test_a_target_agent_send_cannot_use_says_why(target: object, says: str) -> None:
    with pytest.raises(BadTarget) as refused:
        read_target({"op": "dispatch", "text": "x", "target": target})
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("prefix", "hint", "label"),
    [
        (WORKER_PREFIX, "flights", "worker:flights"),
        (WORKER_PREFIX, "worker:flights", "worker:flights"),
        (WORKER_PREFIX, "Price the flights / hotels!", "worker:Price-the-flights-hotels"),
        (WORKER_PREFIX, "a\x00b\nc", "worker:a-b-c"),
        (
            WORKER_PREFIX,
            "\uff46\uff4c\uff49\uff47\uff48\uff54\uff53\uff0f\uff12",
            "worker:flights-2",
        ),  # full-width: NFKC first
        (WORKER_PREFIX, "--..--", None),
        (WORKER_PREFIX, "", None),
        (FORK_PREFIX, "porto", "fork-porto"),
        (FORK_PREFIX, "x" * 200, "fork-" + "x" * 64),
    ],
)
def test_a_hint_becomes_a_safe_prefixed_label(prefix: str, hint: str, label: str | None) -> None:
    made = hinted_label(prefix, hint)
    assert made == label
    if made is not None:
        assert check_new_label(made) == made


def test_a_taken_label_gets_the_first_free_number_then_the_fallback() -> None:
    taken = {"worker:a", "worker:a-2"}
    assert first_free("worker:b", taken.__contains__, "X") == "worker:b"
    assert first_free("worker:a", taken.__contains__, "X") == "worker:a-3"
    assert first_free("worker:a", lambda _label: True, "X") == "worker:a-X"


@pytest.mark.parametrize(
    ("stored", "queue", "shown"),
    [
        ("pending", "queued", "pending"),
        ("pending", "claimed", "running"),
        ("pending", "dropped", "cancelled"),
        ("pending", "dead", "failed"),
        ("pending", None, "pending"),
        ("completed", "done", "completed"),
        ("failed", "dead", "failed"),
    ],
)
def test_a_tracked_task_reads_as_settled_or_as_its_queue_item_stands(
    stored: str, queue: str | None, shown: str
) -> None:
    assert task_status(stored, queue) == shown


def test_the_merged_cursor_bounds_each_source_by_its_rank() -> None:
    assert _after(None, 0) is None
    # After a worker at t: workers after its label at t; tasks from t on.
    assert _after((10, 0, "worker:b"), 0) == (10, "worker:b")
    assert _after((10, 0, "worker:b"), 1) == (10, "")
    # After a task at t: tasks after its id at t; workers only after t.
    assert _after((10, 1, "agent-task:x"), 1) == (10, "agent-task:x")
    assert _after((10, 1, "agent-task:x"), 0) == (11, "")
