"""After a turn commits, record its reply as an outbound event and one delivery per chunk.

This runs inside the turn's own transaction (an engine commit hook): the intent to send is
in the ledger before anything leaves, and a turn never commits without it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.service import CommitHook
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import MessageRole, MessageSource, TurnStatus
from nexus.ledger.records import DeliveryDraft, EventDraft, EventRecord, SessionRecord
from nexus.outbound.addressing import INTERNAL_TRIGGERS, SENDERS, Address, address_for
from nexus.outbound.chunking import chunk, limit_for
from nexus.outbound.markup import render

# An answer that is exactly this is kept in the ledger but sent nowhere (a heartbeat with
# nothing to say, say).
NO_REPLY = "NO_REPLY"
REPLY = "reply"
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


def reply_hook(doorbell: Doorbell | None) -> CommitHook:
    def hook(uow: UnitOfWork, session: SessionRecord, turn_id: str, result: TurnResult) -> None:
        if session.is_subagent or result.status != TurnStatus.COMPLETED:
            return  # a worker answers its manager (agents.results), never a platform
        text = reply_text(result)
        if text is None:
            return
        found = _delivery_context(uow, session, turn_id)
        if found is None:
            return  # asked through the API or the CLI: the answer is read there
        context, raw = found
        first = plan_reply(uow, session, turn_id, text, context, address_for(context, raw))
        if first is not None and doorbell is not None:
            uow.after_commit(partial(doorbell.delivery_ready, first))

    return hook


def plan_reply(
    uow: UnitOfWork,
    session: SessionRecord,
    turn_id: str,
    text: str,
    context: EventRecord,
    address: Address | None,
) -> str | None:
    """Store the reply event and its chunks; returns the first chunk's delivery id."""
    reply_id = f"{REPLY}:{turn_id}"
    drafts = [] if address is None else _chunks(session, turn_id, reply_id, text, address)
    if address is None:
        disposition, detail = (
            "undeliverable",
            f"{context.adapter} gives no way to answer this conversation",
        )
    else:
        disposition = "delivering"
        detail = f"{len(drafts)} chunk(s) via {address.sender}"
    # Stored already settled: no router looks at a reply, and it costs one statement.
    uow.ledger.events.insert(
        EventDraft(
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
            payload={"turn_id": turn_id, "session": session.label, "in_reply_to": context.id},
        ),
        disposition=disposition,
        detail=detail,
    )
    ids = uow.ledger.deliveries.add(drafts) if drafts else []
    return ids[0] if ids else None


def _chunks(
    session: SessionRecord, turn_id: str, reply_id: str, text: str, address: Address
) -> list[DeliveryDraft]:
    """The reply cut for the platform (never inside a code fence) and rendered in its markup."""
    pieces = [text] if address.format in _RAW_FORMATS else chunk(text, limit_for(address.format))
    drafts = []
    for index, piece in enumerate(pieces):
        rendered = render(address.format, piece) if address.format not in _RAW_FORMATS else None
        target = dict(address.target)
        if rendered is not None and rendered.parse_mode:
            target["parse_mode"] = rendered.parse_mode
        if index == 0 and address.reply_to:
            target["reply_to"] = address.reply_to  # the first chunk answers; the rest follow
        drafts.append(
            DeliveryDraft(
                turn_id=turn_id,
                chunk_index=index,
                session_id=session.id,
                event_id=reply_id,
                platform=address.sender,
                target=target,
                text=rendered.text if rendered is not None else piece,
                idempotency_key=f"{turn_id}:{index}",
            )
        )
    return drafts


def _delivery_context(
    uow: UnitOfWork, session: SessionRecord, turn_id: str
) -> tuple[EventRecord, dict[str, Any]] | None:
    """The inbound message a reply answers, with the platform's raw update: the turn's own,
    or for an internal trigger the last message a person sent this session (a merged
    entity answered where they wrote)."""
    found = uow.ledger.events.answered_by(turn_id)
    source = found[0] if found is not None else None
    if found is not None and source is not None:
        if source.adapter in SENDERS and source.direction == "inbound":
            return found
        if source.adapter in INTERNAL_TRIGGERS:
            latest = uow.ledger.events.latest_inbound_for_session(session.id, SENDERS)
            if latest is not None:
                return latest, uow.ledger.events.payload_of(latest.id)
    return None
