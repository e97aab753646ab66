"""Session keys and ACL policies: pure decisions, no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.access.keys import dm_key, system_key, worker_key
from nexus.access.policy import (
    PolicyError,
    Principal,
    Venue,
    decide,
    load_policies,
    parse_policies,
)
from nexus.ledger.enums import QueueMode

DEFAULTS = load_policies(None)
KNOWN = Principal(type="known", entity_id="ent_001")


def test_session_key_formats_follow_the_design() -> None:
    assert dm_key("ent_002") == "dm:ent_002"
    assert worker_key("01HWXYZ") == "worker:01HWXYZ"
    assert worker_key().startswith("worker:") and len(worker_key()) == len("worker:") + 26
    assert system_key("compaction") == "system:compaction"


@pytest.mark.parametrize(
    ("delivery", "key"),
    [
        (Venue("imessage", "dm", "+15551234567"), "dm:ent_001"),
        (Venue("discord", "group", "general"), "group:discord:general"),
        (Venue("slack", "channel", "eng", "ts123"), "group:slack:eng:thread:ts123"),
        (Venue("telegram", "group", "-100123", "4"), "group:telegram:-100123:thread:4"),
    ],
    ids=["dm", "group", "channel-thread", "forum-topic"],
)
def test_default_policies_give_the_design_keys(delivery: Venue, key: str) -> None:
    decision = decide(DEFAULTS, KNOWN, delivery)
    assert decision.allowed
    assert decision.session_key == key
    assert decision.persona == "atlas"


def test_an_unknown_principal_in_a_dm_is_denied_with_the_reason() -> None:
    decision = decide(DEFAULTS, Principal(type="unknown"), Venue("sms", "dm", "+1"))
    assert not decision.allowed
    assert decision.reason == "no policy matched a unknown principal in a dm on sms"


def test_first_match_wins_and_can_deny_or_set_a_queue_mode() -> None:
    policies = parse_policies(
        """
policies:
  - name: block-spam-group
    match: {delivery: {platform: telegram, peer_id: ["-100666*"]}}
    deny: true
    reason: spam group
  - name: vip
    match: {principal: {tags: [vip]}, delivery: {peer_kind: dm}}
    session: {key: "dm:{principal.entity_id}", persona: concierge, queue_mode: followup}
  - name: rest
    match: {}
    session: {key: "group:{delivery.platform}:{delivery.peer_id}", persona: atlas}
"""
    )
    spam = decide(policies, KNOWN, Venue("telegram", "group", "-1006661"))
    assert (spam.allowed, spam.policy, spam.reason) == (False, "block-spam-group", "spam group")
    vip = decide(
        policies,
        Principal(type="known", entity_id="ent_9", tags=frozenset({"vip"})),
        Venue("whatsapp", "dm", "+44"),
    )
    assert (vip.session_key, vip.persona, vip.queue_mode) == (
        "dm:ent_9",
        "concierge",
        QueueMode.FOLLOWUP,
    )
    rest = decide(policies, KNOWN, Venue("whatsapp", "dm", "+44"))
    assert (rest.policy, rest.session_key) == ("rest", "group:whatsapp:+44")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- name: x\n  match: {}\n", "exactly one of"),
        ("- name: x\n  deny: true\n  session: {key: k, persona: p}\n", "exactly one of"),
        (
            "- name: x\n  match: {delivery: {peer_kind: [carrier-pigeon]}}\n  deny: true\n",
            "peer_kind",
        ),
        ("- name: x\n  deny: true\n  surprise: 1\n", "surprise"),
        ("[]", "at least 1"),
        ("key: [unclosed", "not valid YAML"),
    ],
)
def test_invalid_policy_files_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policies(text)


def test_an_unknown_template_variable_is_an_error() -> None:
    policies = parse_policies(
        "- name: x\n  session: {key: 'dm:{principal.nickname}', persona: p}\n"
    )
    with pytest.raises(PolicyError, match="unknown variable"):
        decide(policies, KNOWN, Venue("sms", "dm", "+1"))


def test_policies_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text("- name: all\n  session: {key: 'x:{delivery.peer_id}', persona: p}\n")
    assert [p.name for p in load_policies(str(path))] == ["all"]
    with pytest.raises(PolicyError, match="no such file"):
        load_policies(str(tmp_path / "missing.yaml"))
