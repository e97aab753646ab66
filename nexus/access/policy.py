"""ACL policies: ordered rules from YAML; the first that matches decides (pure)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nexus.ledger.enums import MAX_DEBOUNCE_MS, DropPolicy, QueueMode

PrincipalType = Literal["owner", "known", "unknown"]
PeerKind = Literal["dm", "group", "channel"]


@dataclass(frozen=True)
class Principal:
    """Who is speaking: the canonical entity behind the sender, if there is one."""

    type: PrincipalType
    entity_id: str | None = None
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Venue:
    """Where it was said."""

    platform: str
    peer_kind: PeerKind
    peer_id: str
    thread_id: str | None = None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrincipalMatch(_Strict):
    type: list[PrincipalType] | None = None
    tags: list[str] | None = None  # any of these


class DeliveryMatch(_Strict):
    platform: list[str] | None = None
    peer_kind: list[PeerKind] | None = None
    peer_id: list[str] | None = None  # glob patterns

    @field_validator("platform", "peer_kind", "peer_id", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class Match(_Strict):
    principal: PrincipalMatch = PrincipalMatch()
    delivery: DeliveryMatch = DeliveryMatch()


class SessionRule(_Strict):
    key: str
    persona: str
    # Queue settings for the sessions this rule keys (a session's own settings win).
    queue_mode: QueueMode | None = None
    queue_cap: int | None = Field(default=None, ge=1)
    drop_policy: DropPolicy | None = None
    debounce_ms: int | None = Field(default=None, ge=0, le=MAX_DEBOUNCE_MS)


class Policy(_Strict):
    name: str
    match: Match = Match()
    session: SessionRule | None = None
    deny: bool = False
    reason: str | None = None

    def model_post_init(self, _context: Any) -> None:
        if self.deny == (self.session is not None):
            raise ValueError(f"policy {self.name!r} needs exactly one of `session` or `deny: true`")


class PolicySet(_Strict):
    policies: list[Policy] = Field(min_length=1)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    policy: str | None
    session_key: str | None = None
    persona: str | None = None
    queue_mode: QueueMode | None = None
    reason: str | None = None
    queue_cap: int | None = None
    drop_policy: DropPolicy | None = None
    debounce_ms: int | None = None


class PolicyError(ValueError):
    """The policy file is unreadable or invalid; the message says where."""


# A session per person and per group, channel or platform thread (docs/people.md,
# "Session keys"); deploy/policies.yaml carries the same rules.
DEFAULT_POLICIES_YAML = """
- name: dm-session
  match:
    principal: {type: [known, owner]}
    delivery: {peer_kind: dm}
  session:
    key: "dm:{principal.entity_id}"
    persona: atlas
- name: group-session
  match:
    delivery: {peer_kind: [group, channel]}
  session:
    key: "group:{delivery.platform}:{delivery.peer_id}{delivery.thread_suffix}"
    persona: atlas
"""


def parse_policies(text: str, *, source: str = "policies") -> list[Policy]:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PolicyError(f"{source}: not valid YAML: {error}") from error
    if isinstance(loaded, dict):
        loaded = loaded.get("policies")
    try:
        return PolicySet(policies=loaded).policies
    except ValidationError as error:
        raise PolicyError(f"{source}: {error}") from error


def load_policies(path: str | None) -> list[Policy]:
    """The policies in `path` (NEXUS_POLICIES), or the built-in defaults."""
    if path is None:
        return parse_policies(DEFAULT_POLICIES_YAML, source="built-in policies")
    file = Path(path)
    if not file.is_file():
        raise PolicyError(f"NEXUS_POLICIES={path}: no such file")
    return parse_policies(file.read_text(), source=str(file))


def _matches(policy: Policy, principal: Principal, delivery: Venue) -> bool:
    wanted_principal, wanted_delivery = policy.match.principal, policy.match.delivery
    if wanted_principal.type is not None and principal.type not in wanted_principal.type:
        return False
    if wanted_principal.tags is not None and not principal.tags & set(wanted_principal.tags):
        return False
    if wanted_delivery.platform is not None and delivery.platform not in wanted_delivery.platform:
        return False
    if (
        wanted_delivery.peer_kind is not None
        and delivery.peer_kind not in wanted_delivery.peer_kind
    ):
        return False
    return wanted_delivery.peer_id is None or any(
        fnmatch.fnmatchcase(delivery.peer_id, pattern) for pattern in wanted_delivery.peer_id
    )


def _render(template: str, principal: Principal, delivery: Venue) -> str:
    values = {
        "principal.entity_id": principal.entity_id or "",
        "principal.type": principal.type,
        "delivery.platform": delivery.platform,
        "delivery.channel": delivery.platform,  # another name for the platform
        "delivery.peer_kind": delivery.peer_kind,
        "delivery.peer_id": delivery.peer_id,
        "delivery.thread_id": delivery.thread_id or "",
        "delivery.thread_suffix": f":thread:{delivery.thread_id}" if delivery.thread_id else "",
    }
    rendered = template
    for name, value in values.items():
        rendered = rendered.replace("{" + name + "}", value)
    if "{" in rendered:
        raise PolicyError(f"session key template {template!r} names an unknown variable")
    return rendered


def decide(policies: Sequence[Policy], principal: Principal, delivery: Venue) -> Decision:
    """The first matching policy's answer; no match is a denial that says so."""
    for policy in policies:
        if not _matches(policy, principal, delivery):
            continue
        if policy.deny or policy.session is None:
            return Decision(allowed=False, policy=policy.name, reason=policy.reason or "denied")
        return Decision(
            allowed=True,
            policy=policy.name,
            session_key=_render(policy.session.key, principal, delivery),
            persona=policy.session.persona,
            queue_mode=policy.session.queue_mode,
            queue_cap=policy.session.queue_cap,
            drop_policy=policy.session.drop_policy,
            debounce_ms=policy.session.debounce_ms,
        )
    return Decision(
        allowed=False,
        policy=None,
        reason=f"no policy matched a {principal.type} principal in a {delivery.peer_kind} "
        f"on {delivery.platform}",
    )
