"""Platform status callbacks (WhatsApp statuses, Twilio's StatusCallback) move deliveries on."""

from __future__ import annotations

from nexus.db import UnitOfWork
from nexus.ledger.enums import DeliveryStatus

# The platforms' words for what became of a message; the rest (queued, accepted, …) tell
# nothing the ledger does not already know.
_STATUSES = {
    "sent": DeliveryStatus.SENT,
    "delivered": DeliveryStatus.DELIVERED,
    "read": DeliveryStatus.READ,
    "failed": DeliveryStatus.FAILED,
    "undelivered": DeliveryStatus.FAILED,
}


def delivery_status(platform_word: str) -> DeliveryStatus | None:
    return _STATUSES.get(platform_word.lower())


def apply_status(uow: UnitOfWork, adapter: str, provider_message_id: str, word: str) -> str:
    """Move the matching delivery forward; returns what happened, for the event's record."""
    status = delivery_status(word)
    if status is None:
        return f"delivery status {word}: nothing to record"
    changed = uow.ledger.deliveries.advance(adapter, provider_message_id, status)
    if changed:
        return f"delivery {provider_message_id} is now {status}"
    return f"delivery status {word}: no delivery moved (unknown message, or old news)"
