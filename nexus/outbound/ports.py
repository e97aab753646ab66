"""The outbound ports: a sender per platform, and a rate limiter every worker shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from nexus.ledger.records import DeliveryRecord


@dataclass(frozen=True)
class Sent:
    """The platform accepted the chunk (its id for it, for status callbacks and audits)."""

    provider_message_id: str | None = None


@dataclass(frozen=True)
class RetryLater:
    """A transient failure (rate limit, 5xx, timeout); `retry_after_ms` when the platform
    said how long to wait."""

    error: str
    retry_after_ms: int | None = None


@dataclass(frozen=True)
class Refused:
    """A permanent failure (no permission, a bad request, a sender not configured): sending
    the same thing again cannot succeed, so it is never retried."""

    error: str


SendResult = Sent | RetryLater | Refused


class Sender(Protocol):
    """Sends one chunk to one platform."""

    name: str

    def send(self, delivery: DeliveryRecord) -> SendResult: ...

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        """True when sending this chunk twice makes one message at the platform (an
        idempotency key or nonce it honours), so a crashed send may safely be repeated."""
        ...


class RateLimiter(Protocol):
    """Books send slots per key (a platform) across all workers."""

    def reserve(self, key: str, per_second: float) -> int:
        """Book the next slot; returns how many ms to wait before using it."""
        ...
