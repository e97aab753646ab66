"""The running record's step, from a session's own stream events (nexus/queueing/running.py)."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.engine.stream_events import StreamEvent
from nexus.queueing.running import change_for


@pytest.mark.parametrize(
    ("kind", "data", "step"),
    [
        ("session.started", {"turn_id": "t"}, "starting"),
        ("step.started", {"call": 2}, "model call 2"),
        ("tool.started", {"id": "c1", "name": "lookup"}, "tool lookup"),
        ("context.compacting", {"trigger": "overflow", "turns": 3}, "compacting"),
        ("turn.completing", {"turn_id": "t", "status": "completed"}, "completing"),
    ],
)
def test_each_phase_of_a_turn_names_its_step(kind: str, data: dict[str, Any], step: str) -> None:
    change = change_for(StreamEvent("s1", kind, data))
    assert change is not None and change.fields["step"] == step


def test_the_end_of_a_run_clears_the_record_and_other_events_leave_it() -> None:
    for kind in ("session.completed", "session.failed"):
        ended = change_for(StreamEvent("s1", kind, {}))
        assert ended is not None and ended.kind == "end"
    assert change_for(StreamEvent("s1", "message.delta", {"text": "x"})) is None
