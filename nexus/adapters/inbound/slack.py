"""Slack Events API and slash commands: v0 signatures with a 300 s window."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.signature import Clock, SignatureVerifier

from nexus.adapters.inbound.attachments import attachment, capped, kind_of
from nexus.adapters.inbound.base import (
    ImmediateAnswer,
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.bounds import load_json_object
from nexus.adapters.inbound.signatures import SecretAdapter, required_headers
from nexus.event import (
    Attachment,
    Author,
    Container,
    ContainerKind,
    EventKind,
    NexusEvent,
)

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
REPLAY_WINDOW_S = 300

_CHANNEL_TYPES: dict[str, ContainerKind] = {
    "im": "dm",
    "mpim": "group",
    "group": "group",
    "channel": "channel",
}
# Slash commands name the conversation instead of typing it; public channels keep their name.
_SLASH_CHANNEL_TYPES = {"directmessage": "im", "privategroup": "group"}
# Subtypes that are someone speaking (a file with its caption, a /me); every other subtype
# is a fact about the channel.
_SPOKEN = frozenset({None, "thread_broadcast", "file_share", "me_message"})
_EDITS = {
    "message_changed": "edits are not answered",
    "message_deleted": "a deleted message is recorded, not answered",
}


class _FixedClock(Clock):
    """slack_sdk's verifier asks a clock for now; ours is the request's `now_ms`."""

    def __init__(self, now_s: float) -> None:
        self._now = now_s

    def now(self) -> float:
        return self._now


class SlackAdapter(SecretAdapter):
    name = "slack"
    configured_by = "NEXUS_SLACK_SIGNING_SECRET"

    def __init__(self, signing_secret: str | None) -> None:
        # slack_sdk refuses a blank secret with ValueError; to us it is simply not set.
        super().__init__(signing_secret if signing_secret and signing_secret.strip() else None)

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        secret = self.configured_secret()
        timestamp, signature = required_headers(request, TIMESTAMP_HEADER, SIGNATURE_HEADER)
        try:
            age = abs(now_ms / 1000 - int(timestamp))
        except ValueError as error:
            raise SignatureRejected(f"{TIMESTAMP_HEADER} is not a Unix time") from error
        # The SDK checks the window too but answers only False; checking first says why.
        if age > REPLAY_WINDOW_S:
            raise SignatureRejected(
                f"{TIMESTAMP_HEADER} is stale ({age:.0f} s old; Slack allows {REPLAY_WINDOW_S} s)"
            )
        verifier = SignatureVerifier(secret, clock=_FixedClock(now_ms / 1000))
        if not verifier.is_valid(body=request.body, timestamp=timestamp, signature=signature):
            raise SignatureRejected(f"{SIGNATURE_HEADER} does not match the body")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        content_type = request.header("content-type") or ""
        if content_type.startswith("application/x-www-form-urlencoded"):
            return InboundOutcome(events=(_form_event(request),))
        payload = json_body(request)
        kind = payload.get("type")
        if kind == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                raise MalformedRequest("url_verification needs a string challenge")
            return InboundOutcome(answer=ImmediateAnswer({"challenge": challenge}))
        if kind == "app_rate_limited":
            return InboundOutcome(events=(_rate_limited(payload),))
        if kind != "event_callback":
            raise MalformedRequest(f"unsupported Slack payload type {kind!r}")
        event_id, event = payload.get("event_id"), payload.get("event")
        if not isinstance(event_id, str) or not event_id or not isinstance(event, dict):
            raise MalformedRequest("an event_callback needs an event_id and an event object")
        return InboundOutcome(events=(_event(bounded_id("slack:", event_id), payload, event),))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _container(channel: Any, channel_type: Any) -> Container | None:
    if not isinstance(channel, str) or not channel:
        return None
    kind = _CHANNEL_TYPES.get(str(channel_type))
    if kind is None:  # app_mention carries no channel_type; the id's prefix tells
        kind = (
            "dm" if channel.startswith("D") else "group" if channel.startswith("G") else "channel"
        )
    return Container(kind=kind, id=channel)


def _said(event: dict[str, Any]) -> dict[str, Any]:
    """The message an event is about: an edit's new version, a deletion's old one."""
    subtype = event.get("subtype")
    if subtype == "message_changed":
        return _obj(event.get("message"))
    if subtype == "message_deleted":
        return _obj(event.get("previous_message"))
    return event


def _is_bot(said: dict[str, Any]) -> bool:
    # Classic bots post as subtype bot_message without a user; apps post as a user with bot_id.
    return said.get("subtype") == "bot_message" or bool(
        said.get("bot_id") or said.get("bot_profile")
    )


def _sender(said: dict[str, Any]) -> Author | None:
    user = said.get("user") or said.get("bot_id")
    if not isinstance(user, str):
        return None
    profile, bot = _obj(said.get("user_profile")), _obj(said.get("bot_profile"))
    name = (
        profile.get("display_name")
        or profile.get("real_name")
        or bot.get("name")
        or said.get("username")
    )
    return Author(id=user, display_name=name or None, is_bot=_is_bot(said))


def _files(said: dict[str, Any]) -> tuple[Attachment, ...]:
    files = said.get("files")
    if not isinstance(files, list):
        return ()
    # url_private needs the bot token to fetch; the id is what files.info takes.
    return capped(
        attachment(
            kind_of(f.get("mimetype")),
            file_id=f.get("id"),
            url=f.get("url_private"),
            name=f.get("name"),
            mime_type=f.get("mimetype"),
            size=f.get("size"),
            width=f.get("original_w"),
            height=f.get("original_h"),
            duration=_seconds(f.get("duration_ms")),
        )
        for f in files
        if isinstance(f, dict)
    )


def _seconds(ms: Any) -> int | None:
    if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0:
        return round(ms / 1000)
    return None


def _event(event_id: str, payload: dict[str, Any], event: dict[str, Any]) -> NexusEvent:
    kind, subtype = event.get("type"), event.get("subtype")
    said = _said(event)
    # An edit's own ts is the edit's; the message keeps the ts it was first posted under.
    ts = said.get("ts") or _obj(event.get("previous_message")).get("ts") or event.get("ts")
    thread_ts = said.get("thread_ts")
    base = NexusEvent(
        id=event_id,
        adapter="slack",
        platform="slack",
        space=payload.get("team_id"),
        sender=_sender(said),
        container=_container(event.get("channel"), event.get("channel_type")),
        # A thread's root carries thread_ts == ts: it starts the thread but is not inside it.
        platform_thread_id=thread_ts if thread_ts and thread_ts != ts else None,
        text=said.get("text") or None,
        attachments=_files(said),
        message_id=ts,
        occurred_at=_millis(payload.get("event_time"), event.get("ts")),
        raw=payload,
    )
    if kind not in ("message", "app_mention"):
        return _ignored(base, "unsupported", f"Slack event type {kind} is not handled")
    if subtype in _EDITS:
        return _ignored(base, "edit", _EDITS[subtype])
    if _is_bot(said):
        return _ignored(base, "bot_echo", "sent by a bot")
    if subtype not in _SPOKEN:
        return _ignored(base, "system", f"channel event ({subtype})")
    if not base.text and not base.attachments:
        return _ignored(base, "unsupported", "no text or files")
    return base


def _ignored(event: NexusEvent, kind: EventKind, reason: str) -> NexusEvent:
    return event.model_copy(update={"kind": kind, "ignore_reason": reason})


def _millis(event_time: Any, ts: Any) -> int:
    if isinstance(event_time, int):
        return event_time * 1000
    try:
        return int(float(ts) * 1000)
    except (TypeError, ValueError, OverflowError):  # "1e400" is a float, and infinite
        return 0


def _rate_limited(payload: dict[str, Any]) -> NexusEvent:
    # Slack's notice that it is dropping this app's events: no event_id, one per team-minute.
    minute, team = payload.get("minute_rate_limited"), payload.get("team_id")
    if not isinstance(minute, int) or not isinstance(team, str):
        raise MalformedRequest("app_rate_limited needs team_id and an integer minute_rate_limited")
    return NexusEvent(
        id=bounded_id("slack:rate_limited:", f"{team}:{minute}"),
        adapter="slack",
        platform="slack",
        kind="system",
        space=team,
        occurred_at=minute * 1000,
        raw=payload,
        ignore_reason="Slack is rate-limiting event deliveries to this app",
    )


def _form_event(request: InboundRequest) -> NexusEvent:
    try:
        text = request.body.decode("utf-8")
        form = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=True))
    except (UnicodeDecodeError, ValueError) as error:
        raise MalformedRequest(f"a Slack form body must be URL-encoded: {error}") from error
    # Forms carry no date of their own; the signed request timestamp is Slack's.
    stamp = request.header(TIMESTAMP_HEADER) or ""
    occurred_at = int(stamp) * 1000 if stamp.isdigit() else 0
    if "payload" in form:
        return _interaction(form["payload"], request.body, occurred_at)
    return _slash_command(form, occurred_at)


def _slash_command(form: dict[str, str], occurred_at: int) -> NexusEvent:
    trigger, command = form.get("trigger_id"), form.get("command")
    if not trigger or not command:
        raise MalformedRequest("a slash command needs command and trigger_id")
    channel_name = form.get("channel_name", "")
    channel_type = "mpim" if channel_name.startswith("mpdm-") else None
    channel_type = _SLASH_CHANNEL_TYPES.get(channel_name, channel_type)
    user = form.get("user_id")
    return NexusEvent(
        id=bounded_id("slack:cmd:", trigger),
        adapter="slack",
        platform="slack",
        space=form.get("team_id"),
        sender=Author(id=user, display_name=form.get("user_name")) if user else None,
        container=_container(form.get("channel_id"), channel_type),
        text=f"{command} {form.get('text', '')}".strip(),
        occurred_at=occurred_at,
        raw=form,
    )


def _interaction(encoded: str, body: bytes, occurred_at: int) -> NexusEvent:
    """Buttons, shortcuts and modals post here too if Interactivity points at this URL."""
    payload = load_json_object(encoded, "the interactive payload")
    # view_closed has no trigger_id; Slack does not retry these, so the bytes identify it.
    trigger = payload.get("trigger_id")
    provider_id = trigger if isinstance(trigger, str) and trigger else _digest(body)
    user = _obj(payload.get("user")).get("id")
    event = NexusEvent(
        id=bounded_id("slack:interaction:", provider_id),
        adapter="slack",
        platform="slack",
        kind="unsupported",
        space=_obj(payload.get("team")).get("id"),
        sender=Author(id=user, display_name=_obj(payload.get("user")).get("name"))
        if isinstance(user, str)
        else None,
        container=_container(_obj(payload.get("channel")).get("id"), None),
        occurred_at=occurred_at,
        raw=payload,
        ignore_reason=f"interactive payload {payload.get('type')} is not handled",
    )
    return _button_press(event, payload) if payload.get("type") == "block_actions" else event


def _button_press(event: NexusEvent, payload: dict[str, Any]) -> NexusEvent:
    """A pressed button is the person saying its value, in the thread its message was in.
    Slack posts a link button's click here too; it has no value and is only recorded."""
    actions = payload.get("actions")
    pressed = _obj(actions[0]) if isinstance(actions, list) and actions else {}
    value = pressed.get("value")
    if not isinstance(value, str) or not value:
        return event.model_copy(update={"ignore_reason": "a button press without a value"})
    container, message = _obj(payload.get("container")), _obj(payload.get("message"))
    thread = container.get("thread_ts") or message.get("thread_ts")
    answered = container.get("message_ts") or message.get("ts")
    return event.model_copy(
        update={
            "kind": "callback",
            "ignore_reason": None,
            "text": value,
            "container": event.container or _container(container.get("channel_id"), None),
            "platform_thread_id": str(thread) if thread else None,
            "reply_to": str(answered) if answered else None,
        }
    )


def _digest(body: bytes) -> str:
    return "sha256-" + hashlib.sha256(body).hexdigest()[:32]
