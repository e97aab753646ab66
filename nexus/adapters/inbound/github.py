"""GitHub webhooks: X-Hub-Signature-256, one delivery per request, keyed by what it says."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from nexus.adapters.inbound.attachments import obj as _obj
from nexus.adapters.inbound.base import InboundOutcome, InboundRequest, MalformedRequest, json_body
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.signatures import SecretAdapter, check_sha256_signature
from nexus.event import Author, Container, NexusEvent

SIGNATURE_HEADER = "X-Hub-Signature-256"
EVENT_HEADER = "X-GitHub-Event"
DELIVERY_HEADER = "X-GitHub-Delivery"
# (event, action) pairs where a person said something the assistant should answer.
_CONVERSATIONAL = {
    ("issue_comment", "created"): "comment",
    ("issues", "opened"): "issue",
    ("pull_request", "opened"): "pull_request",
    ("discussion_comment", "created"): "comment",
    ("pull_request_review_comment", "created"): "comment",
}
_EDITS = frozenset({"edited", "deleted"})
# Who and where a delivery is about, not what happened: their counters (stars, open issues,
# pushed_at) move between two deliveries of one event, so they are left out of its identity.
_CONTEXT = frozenset({"repository", "organization", "installation", "enterprise"})


class GitHubAdapter(SecretAdapter):
    name = "github"
    configured_by = "NEXUS_GITHUB_WEBHOOK_SECRET"

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # GitHub defines no replay window; the delivery GUID deduplicates redeliveries.
        check_sha256_signature(request, self.configured_secret(), SIGNATURE_HEADER)

    def parse(self, request: InboundRequest) -> InboundOutcome:
        event_name, delivery = request.header(EVENT_HEADER), request.header(DELIVERY_HEADER)
        if not event_name or not delivery:
            raise MalformedRequest(f"a GitHub delivery needs {EVENT_HEADER} and {DELIVERY_HEADER}")
        payload = json_body(request)
        key = identity(event_name, payload) or delivery
        return InboundOutcome(events=(_event(bounded_id("github:", key), event_name, payload),))


def identity(event_name: str, payload: dict[str, Any]) -> str | None:
    """What makes this delivery the same event as another, whatever its GUID: the event
    type, every top-level plain value (action, ref, before/after, number…) and the id and
    updated_at of every top-level object (comment, issue, pull_request, label, sender…),
    leaving out the repository and organization around it. GitHub sends one event again
    under a new GUID when it is redelivered, or when both a repository and an organization
    hook see it; the payload's own ids are the same each time. None when the payload names
    nothing of its own (then the delivery GUID is all there is)."""
    parts: dict[str, Any] = {}
    for key, value in payload.items():
        if key in _CONTEXT:
            continue
        if isinstance(value, dict) and isinstance(value.get("id"), str | int):
            parts[key] = [value["id"], value.get("updated_at")]
        elif isinstance(value, str | int | float | bool):
            parts[key] = value
    if not any(isinstance(v, list) for v in parts.values()):
        return None
    canonical = json.dumps(parts, sort_keys=True).encode()
    action = payload.get("action")
    label = f"{event_name}.{action}" if isinstance(action, str) else event_name
    return f"{label[:80]}:{hashlib.sha256(canonical).hexdigest()[:40]}"


def _subject(payload: dict[str, Any]) -> dict[str, Any]:
    """The issue, pull request or discussion the delivery is about."""
    for key in ("issue", "pull_request", "discussion"):
        if isinstance(payload.get(key), dict):
            return _obj(payload[key])
    return {}


def _millis(stamp: Any) -> int:
    if not isinstance(stamp, str):
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def _event(event_id: str, name: str, payload: dict[str, Any]) -> NexusEvent:
    action = payload.get("action")
    repository = _obj(payload.get("repository")).get("full_name")
    sender = _obj(payload.get("sender"))
    login = str(sender.get("login", ""))
    is_bot = sender.get("type") == "Bot" or login.endswith("[bot]")
    subject = _subject(payload)
    role = _CONVERSATIONAL.get((name, str(action)))
    said = _obj(payload.get("comment")) if role == "comment" else subject
    number = subject.get("number")
    event = NexusEvent(
        id=event_id,
        adapter="github",
        platform="github",
        space=repository or _obj(payload.get("organization")).get("login"),
        sender=Author(id=login, display_name=login, is_bot=is_bot) if login else None,
        container=Container(kind="group", id=repository) if repository else None,
        platform_thread_id=str(number) if number is not None else None,
        message_id=said.get("html_url") or said.get("node_id"),
        occurred_at=_millis(said.get("created_at") or said.get("updated_at")),
        raw=payload,
    )
    if name == "ping":
        return _ignored(event, "system", f"webhook ping: {payload.get('zen', '')}".strip())
    if is_bot:
        return _ignored(event, "bot_echo", f"sent by {login}")
    if action in _EDITS:
        return _ignored(event, "edit", f"{name} {action} is recorded, not answered")
    if role is None:
        described = f"{name}.{action}" if action else name
        return _ignored(event, "system", f"GitHub event {described} is recorded for hooks")
    if role == "comment":
        return event.model_copy(update={"text": said.get("body")})
    title, body = said.get("title") or "", said.get("body") or ""
    return event.model_copy(update={"text": f"{title}\n\n{body}".strip()})


def _ignored(event: NexusEvent, kind: str, reason: str) -> NexusEvent:
    return event.model_copy(update={"kind": kind, "ignore_reason": reason})
