"""Send one chunk: book a rate slot, mark it sending, call the platform, record the outcome.

The ledger is told a send has begun before the platform is called, and what came of it
after; a worker that dies in between leaves a `sending` row whose lease lapses, and
`recover` decides from the platform's idempotency whether sending again is safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import structlog

from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.failures import excerpt, http_status, stored
from nexus.outbound.ports import RateLimiter, Refused, RetryLater, Sender, SendResult, Sent
from nexus.outbound.retry import RetryPolicy

log = structlog.get_logger(__name__)

Outcome = Literal["sent", "retry", "failed", "deferred", "skipped"]
Uncertain = Literal["fail", "resend"]
# A rate-limit wait longer than this is not slept through in the task: the chunk is rung
# again when its slot comes, and the worker takes other work meanwhile.
MAX_INLINE_WAIT_MS = 2_000
DEFAULT_RATE_PER_S = 10.0


@dataclass(frozen=True)
class Recovered:
    resent: int  # lapsed sends released for another attempt (idempotent platforms)
    failed: int  # lapsed sends recorded as failed, outcome unknown
    rung: int  # due chunks rung again


@dataclass
class DeliveryService:
    database: Database
    senders: Mapping[str, Sender]
    limiter: RateLimiter
    doorbell: Doorbell
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    lease_ms: int = 60_000
    uncertain: Uncertain = "fail"
    rates: Mapping[str, float] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep

    def send(self, delivery_id: str) -> Outcome:
        """The `nexus.delivery.send` task: one chunk, whoever rang it (a commit's backup
        ring, a retry's, the next chunk's, recovery's)."""
        with self.database.unit_of_work() as uow:
            pending = uow.ledger.deliveries.get(delivery_id)
        if pending is None or pending.status != DeliveryStatus.PENDING:
            return "skipped"  # sent, failed, or another worker has it: a duplicate ring
        return self._attempt(delivery_id, pending.platform)

    def send_reply(self, chunk_ids: Sequence[str], platform: str) -> list[Outcome]:
        """A turn's reply, sent by the run that committed it, on the run's thread: its chunks
        (all for `platform`, as the reply hook recorded them) in order, while each lands.
        What does not land is left where `send` leaves it: a retry rung for its backoff, a
        refusal failed, a rate-limit wait rung for its slot, and a chunk that the task rung at
        commit took first (`begin_send` lets exactly one of them have it) is that task's.

        The ids and platform come from the commit that stored them, so nothing is read
        first; the next chunk's id is known, so it is not read after a send either."""
        outcomes: list[Outcome] = []
        for index, delivery_id in enumerate(chunk_ids):
            outcome = self._attempt(delivery_id, platform, later=chunk_ids[index + 1 :])
            outcomes.append(outcome)
            if outcome != "sent":
                break
        return outcomes

    def _attempt(
        self, delivery_id: str, platform: str, *, later: Sequence[str] | None = None
    ) -> Outcome:
        """Book a rate slot, take the chunk (`begin_send`, committed), call the platform,
        record what came of it. `later`: the reply's chunks after this one, when known."""
        # A platform with no sender takes no slot of its shared rate, and no one waits for
        # one: the chunk is refused as soon as it is taken (`_call`).
        wait_ms = (
            self.limiter.reserve(platform, self.rates.get(platform, DEFAULT_RATE_PER_S))
            if platform in self.senders
            else 0
        )
        if wait_ms > MAX_INLINE_WAIT_MS:
            self.doorbell.delivery_ready(delivery_id, wait_ms)
            return "deferred"
        if wait_ms:
            self.sleep(wait_ms / 1000)
        with self.database.unit_of_work() as uow:
            delivery = uow.ledger.deliveries.begin_send(delivery_id, lease_ms=self.lease_ms)
            uow.commit()
        if delivery is None:
            return "skipped"  # not due, not next in its reply, or taken meanwhile
        result = self._call(delivery)
        with self.database.unit_of_work() as uow:
            outcome = self._record(uow, delivery, result, later)
            uow.commit()
        log.info("delivery_attempt", **_log_fields(delivery), outcome=outcome)
        if outcome == "failed" and not isinstance(result, Sent):
            # Final: nobody will read this reply. Say why, at a level an operator sees.
            log.warning(
                "delivery_failed",
                **_log_fields(delivery),
                reason="refused" if isinstance(result, Refused) else "gave_up",
                status=http_status(result.error),
                error=excerpt(result.error),
            )
        return outcome

    def recover(self) -> Recovered:
        """Settle sends whose worker stopped mid-call, then ring every chunk that is due
        (on worker start and every timer tick)."""
        resent = failed = 0
        with self.database.unit_of_work() as uow:
            for lapsed in uow.ledger.deliveries.lapsed_sends():
                if self._may_resend(lapsed):
                    resent += uow.ledger.deliveries.release_lapsed(lapsed.id)
                else:
                    failed += bool(uow.ledger.deliveries.fail(lapsed.id, self._unknown(lapsed)))
            uow.commit()
        with self.database.unit_of_work() as uow:
            due = uow.ledger.deliveries.due()
        for delivery_id in due:
            self.doorbell.delivery_ready(delivery_id)
        return Recovered(resent=resent, failed=failed, rung=len(due))

    # -- pieces ------------------------------------------------------------------------------

    def _call(self, delivery: DeliveryRecord) -> SendResult:
        sender = self.senders.get(delivery.platform)
        if sender is None:
            return Refused(f"no outbound sender for {delivery.platform!r}")
        try:
            return sender.send(delivery)
        except Exception as error:  # a bug or an unexpected library error: retry, recorded
            log.exception("delivery_sender_error", delivery_id=delivery.id)
            return RetryLater(f"{type(error).__name__}: {error}")

    def _record(
        self,
        uow: UnitOfWork,
        delivery: DeliveryRecord,
        result: SendResult,
        later: Sequence[str] | None = None,
    ) -> Outcome:
        deliveries = uow.ledger.deliveries
        if isinstance(result, Sent):
            if not deliveries.mark_sent(delivery.id, result.provider_message_id):
                return "skipped"  # our lease lapsed and recovery settled it meanwhile
            if later is None:
                following = deliveries.next_chunk(delivery.turn_id, delivery.chunk_index)
            else:
                following = later[0] if later else None
            # Rung even when the caller sends it next itself: should that caller stop
            # first, the chunk goes out now rather than at the next recovery.
            if following is not None:
                uow.after_commit(partial(self.doorbell.delivery_ready, following))
            return "sent"
        if isinstance(result, RetryLater):
            delay = self.policy.delay_ms(delivery.attempts, result.retry_after_ms)
            if delay is not None:
                at = uow.ledger.clock() + delay
                if deliveries.retry_at(delivery.id, at, stored(result.error)):
                    uow.after_commit(partial(self.doorbell.delivery_ready, delivery.id, delay))
                return "retry"
            error = f"gave up after {delivery.attempts} attempts: {result.error}"
        else:
            error = result.error
        deliveries.fail(delivery.id, stored(error))
        return "failed"

    def _may_resend(self, delivery: DeliveryRecord) -> bool:
        if delivery.attempts >= self.policy.max_attempts:
            return False
        sender = self.senders.get(delivery.platform)
        idempotent = sender is not None and sender.idempotent(delivery)
        return idempotent or self.uncertain == "resend"

    def _unknown(self, delivery: DeliveryRecord) -> str:
        if delivery.attempts >= self.policy.max_attempts:
            return f"gave up after {delivery.attempts} attempts; the last one never reported"
        return (
            f"outcome unknown: the worker stopped while sending; {delivery.platform} cannot "
            "drop a duplicate, so it was not sent again (NEXUS_DELIVERY_UNCERTAIN=resend "
            "sends it again instead)"
        )


def _log_fields(delivery: DeliveryRecord) -> dict[str, Any]:
    """Which send a delivery log line is about."""
    return {
        "delivery_id": delivery.id,
        "turn_id": delivery.turn_id,
        "chunk": delivery.chunk_index,
        "platform": delivery.platform,
        "attempt": delivery.attempts,
    }
