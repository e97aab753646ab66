"""Effective queue settings: the session's own, then its policy's, then the defaults."""

from __future__ import annotations

from nexus.ledger.enums import QueueMode
from nexus.queueing.settings import (
    DEBOUNCE_KEY,
    QueueDefaults,
    QueueOverrides,
    Setting,
    effective_queue,
    item_payload,
)

DEFAULTS = QueueDefaults(cap=20, drop="summarize", debounce_ms=1_000)


def test_each_setting_comes_from_the_first_layer_that_sets_it() -> None:
    session = QueueOverrides(cap=5)
    policy = QueueOverrides(mode=QueueMode.COLLECT, cap=50, debounce_ms=3_000)
    found = effective_queue(session, policy, DEFAULTS)
    assert found.cap == Setting(5, "session")
    assert found.mode == Setting(QueueMode.COLLECT, "policy")
    assert found.debounce_ms == Setting(3_000, "policy")
    assert found.drop == Setting("summarize", "default")


def test_with_no_layer_the_mode_is_left_to_each_messages_source() -> None:
    found = effective_queue(QueueOverrides(), QueueOverrides(), DEFAULTS)
    assert found.mode == Setting(None, "default")
    assert (found.cap, found.debounce_ms) == (Setting(20, "default"), Setting(1_000, "default"))


def test_a_zero_is_a_choice_not_an_absence() -> None:
    found = effective_queue(QueueOverrides(debounce_ms=0), QueueOverrides(debounce_ms=9), DEFAULTS)
    assert found.debounce_ms == Setting(0, "session")
    assert item_payload(found) == {DEBOUNCE_KEY: 0}


def test_an_item_records_only_a_debounce_someone_chose() -> None:
    assert item_payload(effective_queue(QueueOverrides(), QueueOverrides(), DEFAULTS)) == {}
    chosen = effective_queue(QueueOverrides(), QueueOverrides(debounce_ms=250), DEFAULTS)
    assert item_payload(chosen) == {DEBOUNCE_KEY: 250}
