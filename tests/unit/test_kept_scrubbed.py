"""A committed turn's kept stream events carry no secret its tools were given, even one
the model streamed across two deltas."""

from __future__ import annotations

from typing import Any

from nexus.engine.credentials import Scrubber
from nexus.engine.kept import scrubbed
from nexus.logs import REDACTED

SECRET = "ghp_canary-7f3a9b2c41"


def test_a_secret_inside_any_event_is_replaced() -> None:
    rows: list[tuple[str, dict[str, Any]]] = [
        ("tool.started", {"arguments": {"token": SECRET}}),
        ("message.delta", {"text": SECRET}),
    ]
    assert scrubbed(rows, Scrubber([SECRET])) == [
        ("tool.started", {"arguments": {"token": REDACTED}}),
        ("message.delta", {"text": REDACTED}),
    ]


def test_a_secret_split_across_deltas_is_replaced_and_the_run_keeps_its_length() -> None:
    rows = [
        ("session.started", {}),
        ("message.delta", {"text": "Trying ghp_ca"}),
        ("message.delta", {"text": "nary-7f3a"}),
        ("message.delta", {"text": "9b2c41. Done"}),
        ("turn.committed", {"turn_id": "t"}),
    ]
    kept = scrubbed(rows, Scrubber([SECRET]))
    assert [kind for kind, _ in kept] == [kind for kind, _ in rows]
    assert "".join(d["text"] for k, d in kept if k == "message.delta") == (
        f"Trying {REDACTED}. Done"
    )
    assert SECRET[:6] not in repr(kept[2:4]) and "9b2c41" not in repr(kept)


def test_deltas_without_a_secret_are_left_as_they_streamed() -> None:
    rows = [("message.delta", {"text": "Hello "}), ("message.delta", {"text": "there"})]
    assert scrubbed(rows, Scrubber([SECRET])) == rows
