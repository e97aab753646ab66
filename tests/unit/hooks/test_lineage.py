"""Which events owe the hooks an evaluation, and the hook lineage an event carries."""

from __future__ import annotations

from nexus.ledger.hook_lineage import LINEAGE, lineage_of, merged, owes_hooks


def test_every_inbound_event_owes_the_hooks_but_a_hooks_own_firing() -> None:
    assert owes_hooks("telegram", "inbound")
    assert owes_hooks("agent", "inbound")  # an agent's message, a worker's result
    assert owes_hooks("timer", "inbound")
    assert not owes_hooks("hook", "inbound")
    assert not owes_hooks("telegram", "outbound")  # a reply or a notice


def test_a_firing_is_in_its_own_hooks_lineage() -> None:
    assert lineage_of("hook", {"hook": "echo", "about": "api:1"}) == ("echo",)
    assert lineage_of("hook", {"hook": "echo", LINEAGE: ["audit", "echo"]}) == ("audit", "echo")


def test_an_event_carries_only_the_lineage_it_was_given() -> None:
    assert lineage_of("agent", {LINEAGE: ["echo"]}) == ("echo",)
    assert lineage_of("agent", {"hook": "not a firing"}) == ()
    assert lineage_of("agent", None) == ()
    assert lineage_of("agent", {LINEAGE: "echo"}) == ()
    assert lineage_of("agent", {LINEAGE: ["echo", 3, None]}) == ("echo",)


def test_a_platforms_payload_is_never_read_as_a_lineage() -> None:
    """What a sender wrote cannot keep a hook from seeing their message."""
    assert lineage_of("telegram", {LINEAGE: ["echo"]}) == ()
    assert lineage_of("webhook", {LINEAGE: ["echo"], "hook": "echo"}) == ()


def test_a_turn_answering_several_inputs_carries_all_their_lineages() -> None:
    assert merged([("echo",), (), ("audit", "echo")]) == ["audit", "echo"]
    assert merged([]) == []
