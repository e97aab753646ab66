"""After a turn commits, record its reply as an outbound event and one delivery per chunk.

This runs inside the turn's own transaction (an engine commit hook): the intent to send is
in the ledger before anything leaves, and a turn never commits without it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.outcomes import CommitHook
from nexus.engine.rich import RichReply, RichReplyError, parse_reaction, parse_rich
from nexus.engine.turn import TurnResult
from nexus.event import INTERNAL_TRIGGERS
from nexus.ledger.enums import MessageRole, MessageSource, ToolCallStatus, TurnStatus
from nexus.ledger.records import (
    DeliveryDraft,
    EventDraft,
    EventRecord,
    SessionRecord,
    ToolCallDraft,
)
from nexus.outbound.addressing import (
    ADDRESSED_FROM_PAYLOAD,
    SENDERS,
    Address,
    address_for,
)
from nexus.outbound.chunking import chunk, limit_for
from nexus.outbound.inline import InlineReplies
from nexus.outbound.markup import render
from nexus.outbound.rich import attachment_targets, native_parts, with_fallback

# An answer that is exactly this is kept in the ledger but sent nowhere (a heartbeat with
# nothing to say, say).
NO_REPLY = "NO_REPLY"
REPLY = "reply"
# The built-in tool whose last completed call in a turn puts buttons and embeds on its answer.
PRESENT_OPTIONS = "present_options"
# The built-in tool whose last completed call in a turn reacts to the message answered.
REACT = "react"
# Senders that put a reaction on the message a reply answers (a BlueBubbles tapback); the
# others ignore it.
REACTS = frozenset({"bluebubbles"})
# Formats that take the model's text as it is, in one piece.
_RAW_FORMATS = frozenset({"webhook"})


def reply_text(result: TurnResult) -> str | None:
    """The turn's final answer: its last complete assistant text."""
    answers = [
        str(m.content.get("text") or "")
        for m in result.messages
        if m.role == MessageRole.ASSISTANT and not m.content.get("partial")
    ]
    text = answers[-1].strip() if answers else ""
    return text if text and text != NO_REPLY else None


def rich_reply(result: TurnResult) -> RichReply | None:
    """The buttons and embeds the turn attached to its answer: its last completed
    `present_options` call (checked again: the tool refused what could not be sent)."""
    call = _last_completed(result, PRESENT_OPTIONS)
    if call is None:
        return None
    try:
        rich = parse_rich(call.parameters)
    except RichReplyError:
        return None
    return None if rich.empty else rich


def reaction(result: TurnResult) -> str | None:
    """The reaction the turn put on the message it answers: its last completed `react`
    call (checked again), or None."""
    call = _last_completed(result, REACT)
    if call is None:
        return None
    try:
        return parse_reaction(call.parameters.get("reaction"))
    except RichReplyError:
        return None


def _last_completed(result: TurnResult, tool_name: str) -> ToolCallDraft | None:
    """The turn's last completed call of `tool_name`, or None."""
    calls = [
        call
        for call in result.tool_calls
        if call.tool_name == tool_name and call.status == ToolCallStatus.COMPLETED
    ]
    return calls[-1] if calls else None


def reply_hook(doorbell: Doorbell | None, inline: InlineReplies | None = None) -> CommitHook:
    """The commit hook that stores a turn's reply. After the commit it rings the first
    chunk's `nexus.delivery.send`, and hands the chunks to `inline`, for the session run
    that committed the turn to send them itself before its next turn (outbound/inline.py);
    the task is then the backup, and finds the chunk sent."""

    def hook(
        uow: UnitOfWork,
        session: SessionRecord,
        turn_id: str,
        result: TurnResult,
        source: EventRecord | None,
    ) -> None:
        if session.is_subagent or result.status != TurnStatus.COMPLETED:
            return  # a worker answers its manager (agents.results), never a platform
        text = reply_text(result)
        reacted = reaction(result) if result.tool_calls else None
        if text is None and reacted is None:
            return
        found = _delivery_context(uow, session, turn_id, source)
        if found is None:
            return  # asked through the API or the CLI: the answer is read there
        context, raw = found
        address = address_for(context, raw)
        if reacted is not None and not _reacts(address, context):
            reacted = None  # a platform without reactions: the answer goes alone
        if text is None:
            if reacted is None:
                return
            rich = None  # no answer: nothing to hang buttons on
        else:
            rich = rich_reply(result)
        ids = plan_reply(uow, session, turn_id, text, context, address, rich, reaction=reacted)
        if not ids or address is None:
            return
        if doorbell is not None:
            uow.after_commit(partial(doorbell.delivery_ready, ids[0]))
        if inline is not None:
            uow.after_commit(partial(inline.ready, ids, address.sender))

    return hook


def _reacts(address: Address | None, context: EventRecord) -> bool:
    return address is not None and address.sender in REACTS and bool(context.message_id)


def plan_reply(
    uow: UnitOfWork,
    session: SessionRecord,
    turn_id: str,
    text: str | None,
    context: EventRecord,
    address: Address | None,
    rich: RichReply | None = None,
    *,
    reaction: str | None = None,
) -> list[str]:
    """Store the reply event and its chunks; returns the chunks' delivery ids, in order.
    `reaction` (where the sender has them) follows the text as a delivery of its own, so a
    refused reaction never holds the answer back; `text` None sends the reaction alone."""
    reply_id = f"{REPLY}:{turn_id}"
    drafts = [] if address is None else _chunks(session, turn_id, reply_id, text, address, rich)
    if address is not None and reaction is not None and context.message_id:
        drafts.append(_reaction(session, turn_id, reply_id, address, context, reaction, drafts))
    if address is None:
        disposition, detail = (
            "undeliverable",
            f"{context.adapter} gives no way to answer this conversation",
        )
    else:
        disposition = "delivering"
        detail = f"{len(drafts)} chunk(s) via {address.sender}"
    # Stored already settled (no router looks at a reply), with its chunks: one statement
    # for the usual one-chunk reply.
    reply = EventDraft(
        id=reply_id,
        adapter=context.adapter,
        platform=context.platform,
        kind=REPLY,
        direction="outbound",
        source=MessageSource.AGENT,
        space=context.space,
        container_kind=context.container_kind,
        container_id=context.container_id,
        platform_thread_id=context.platform_thread_id,
        text=text,
        reply_to=context.message_id,
        occurred_at=uow.ledger.clock(),
        payload=_payload(session, turn_id, context, rich, reaction),
    )
    return uow.ledger.deliveries.add_reply(reply, drafts, disposition=disposition, detail=detail)


def _payload(
    session: SessionRecord,
    turn_id: str,
    context: EventRecord,
    rich: RichReply | None,
    reaction: str | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "turn_id": turn_id,
        "session": session.label,
        "in_reply_to": context.id,
    }
    if rich is not None:  # the form as the model gave it, beside the answer as written
        payload["rich"] = rich.to_json()
    if reaction is not None:
        payload["reaction"] = reaction
    return payload


def _reaction(
    session: SessionRecord,
    turn_id: str,
    reply_id: str,
    address: Address,
    context: EventRecord,
    reaction: str,
    before: list[DeliveryDraft],
) -> DeliveryDraft:
    """The reaction on the message answered, the reply's last delivery."""
    index = len(before)
    tapback = {"message_guid": context.message_id, "reaction": reaction}
    return DeliveryDraft(
        turn_id=turn_id,
        chunk_index=index,
        session_id=session.id,
        event_id=reply_id,
        platform=address.sender,
        target={**address.target, "tapback": tapback},
        text=f"[{reaction}]",
        idempotency_key=f"{turn_id}:{index}",
    )


def _chunks(
    session: SessionRecord,
    turn_id: str,
    reply_id: str,
    text: str | None,
    address: Address,
    rich: RichReply | None,
) -> list[DeliveryDraft]:
    """The reply cut for the platform (never inside a code fence) and rendered in its markup;
    buttons and embeds go on the last chunk, or as lines of text where the platform has none."""
    if text is None:
        return []  # a reaction alone
    fmt = address.format
    if rich is not None:
        text = with_fallback(fmt, text, rich)
    pieces = [text] if fmt in _RAW_FORMATS else chunk(text, limit_for(fmt))
    drafts: list[DeliveryDraft] = []

    def add(target: dict[str, Any], words: str) -> None:
        """The next delivery of the reply: its chunk index is its place among them."""
        index = len(drafts)
        drafts.append(
            DeliveryDraft(
                turn_id=turn_id,
                chunk_index=index,
                session_id=session.id,
                event_id=reply_id,
                platform=address.sender,
                target=target,
                text=words,
                idempotency_key=f"{turn_id}:{index}",
            )
        )

    for index, piece in enumerate(pieces):
        rendered = render(fmt, piece) if fmt not in _RAW_FORMATS else None
        target = dict(address.target)
        if rendered is not None and rendered.parse_mode:
            target["parse_mode"] = rendered.parse_mode
        if index == 0 and address.reply_to:
            target["reply_to"] = address.reply_to  # the first chunk answers; the rest follow
        if rich is not None and index == len(pieces) - 1:
            target.update(native_parts(fmt, rich, rendered.text if rendered else piece))
        add(target, rendered.text if rendered is not None else piece)
    # Files the platform takes as messages of their own (a WhatsApp voice note, an iMessage
    # photo) follow the text, each its own delivery: sent, retried and tracked like a chunk,
    # and one that fails never holds the text back.
    extras = attachment_targets(fmt, rich) if rich is not None else []
    files = list(zip(rich.attachments, extras, strict=True)) if rich and extras else []
    for attachment, extra in files:
        add({**address.target, **extra}, f"[{attachment.kind}] {attachment.url}")
    return drafts


def _delivery_context(
    uow: UnitOfWork, session: SessionRecord, turn_id: str, known: EventRecord | None = None
) -> tuple[EventRecord, dict[str, Any]] | None:
    """The inbound message a reply answers, with the platform's raw update where its
    address needs it: the turn's own (`known` when the run read it, else read here), or
    for an internal trigger the last message a person sent this session (a merged entity
    answered where they wrote)."""
    found = _answered(uow, turn_id, known)
    source = found[0] if found is not None else None
    if found is not None and source is not None:
        if source.adapter in SENDERS and source.direction == "inbound":
            return found
        if source.adapter in INTERNAL_TRIGGERS:
            latest = uow.ledger.events.latest_inbound_for_session(session.id, SENDERS)
            if latest is not None:
                return latest, uow.ledger.events.payload_of(latest.id)
    return None


def _answered(
    uow: UnitOfWork, turn_id: str, known: EventRecord | None
) -> tuple[EventRecord, dict[str, Any]] | None:
    """The event the turn answered with its raw update: from what the run read, the update
    only for an address that needs it (one statement saved on every other reply)."""
    if known is None:
        return uow.ledger.events.answered_by(turn_id)
    if known.adapter in ADDRESSED_FROM_PAYLOAD and known.direction == "inbound":
        return known, uow.ledger.events.payload_of(known.id)
    return known, {}
