"""The session run: one worker at a time turns a session's queue into committed turns.

Lease (duplicate-work saver) → per turn: pick by queue mode → claim in the ledger (epoch + 1,
items claimed under it) → run the turn (abort flag, steer inbox, time limit) → commit with
compare-and-set on head and epoch → send the turn's reply → repeat while work is ready →
release → ring again if anything is owed. Correctness never depends on the lease: a run that
lost it is fenced at commit and its items go back to the queue.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import structlog

from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.outcomes import TurnOutcome
from nexus.engine.query import QueryMessage
from nexus.engine.stream_events import StreamEvent
from nexus.ids import Clock, now_ms
from nexus.ledger.enums import (
    OPEN_QUEUE_STATUSES,
    MessageSource,
    QueueStatus,
)
from nexus.ledger.records import ConsumedItem, EventRecord, QueueItemRecord
from nexus.outbound.inline import InlineReplies, ReadyReply
from nexus.outbound.typing import TypingIndicator
from nexus.queueing.coordination import Coordination, Lease
from nexus.queueing.keepalive import KeepAlive
from nexus.queueing.modes import (
    COMPACT,
    DEFAULT_COLLECT_WINDOW_MS,
    Idle,
    Run,
    WaitUntil,
    next_work,
)
from nexus.queueing.overflow import SUMMARY_PENDING, summarize_overflow
from nexus.sessions.claims import Claim, InlineClaim, RunReport
from nexus.sessions.failures import DEFAULT_MAX_ATTEMPTS, Failures
from nexus.sessions.signals import RunSignals
from nexus.turns.service import TurnService

log = structlog.get_logger(__name__)


@dataclass
class SessionRunner:
    database: Database
    turns: TurnService
    coordination: Coordination
    doorbell: Doorbell
    clock: Clock = now_ms
    lease_ttl_ms: int = 30_000
    turn_time_limit_ms: int = 600_000
    collect_window_ms: int = DEFAULT_COLLECT_WINDOW_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_turns_per_run: int = 50  # then re-ring, so one busy session cannot hog a worker
    # Shows "typing…" where the turn's answer goes, off the turn's path (best effort).
    typing: TypingIndicator | None = None
    # Sends a committed turn's reply on this run's thread before the next turn, rather than
    # leaving it to a delivery task that waits behind the session runs (outbound/inline.py).
    replies: InlineReplies | None = None

    def claim_inline(
        self,
        uow: UnitOfWork,
        session_id: str,
        *,
        alone: tuple[QueueItemRecord, EventRecord] | None = None,
    ) -> InlineClaim | None:
        """In the caller's transaction (the router's, which just queued the session's work):
        take the lease, read the queue and claim the first turn, so that routing and the
        claim commit together, one transaction and its commit's flush less per message.
        `alone`: the item (with its event) that the caller just queued and found to be the
        session's whole queue as `_look` reads it, in this transaction under the session's
        lock; then the queue is not read again.

        None, holding nothing, unless it is a plain claim: the session is busy (its holder
        looks at the queue again when it releases), stale claims are to be settled, or
        nothing is due yet; the caller then runs the session as usual after its commit. A
        caller that gets a claim must hand it to `run` (or release its lease)."""
        lease = self.coordination.acquire(f"session:{session_id}", self.lease_ttl_ms)
        if lease is None:
            return None
        try:
            if alone is not None:
                item, event = alone
                claim: Claim | str | None = self._claim(uow, session_id, [(item, event)], [item])
            else:
                claim = self._look(uow, session_id, stale_first=True)
        except BaseException:
            lease.release()
            raise
        if claim is None or isinstance(claim, str) or not claim.plan.items:
            lease.release()
            return None
        return InlineClaim(session_id, lease, claim)

    def run(self, session_id: str, *, claimed: InlineClaim | None = None) -> RunReport:
        """Run the session's due work under its lease; `claimed` is a first claim already
        made and committed (`claim_inline`), whose lease this run takes over."""
        turns = failed = dead = 0
        status = "done"
        first = True
        while True:
            if claimed is not None:
                lease: Lease | None = claimed.lease
            else:
                lease = self.coordination.acquire(f"session:{session_id}", self.lease_ttl_ms)
            if lease is None:
                # Whoever holds it re-checks the queue after releasing, so nothing is stranded.
                if first:
                    return RunReport(status="busy")
                break
            looked = False  # whether the last step's read showed nothing more waiting
            try:
                with KeepAlive(lease, self.lease_ttl_ms):
                    while turns + failed < self.max_turns_per_run:
                        if claimed is not None:
                            step = self._run_turn(
                                session_id, claimed.claim, announce=claimed.announce
                            )
                            more, claimed = claimed.claim.more, None
                        else:
                            step, more = self._step(session_id, first=first)
                        first = False
                        if step in ("idle", "waiting", "fenced"):
                            status = "waiting" if step == "waiting" else status
                            status = "fenced" if step == "fenced" else status
                            break
                        if step == "failed" or step == "dead":
                            failed += 1
                            dead += step == "dead"
                        else:
                            turns += 1
                        if not more:
                            # Nothing else was waiting when this turn was claimed: instead of
                            # reading again under the lease, release and read once after.
                            looked = True
                            break
            finally:
                lease.release()
            if looked and turns + failed < self.max_turns_per_run:
                if self._ring_if_owed(session_id, take_now=True):
                    continue  # due now: run it here, under the lease again, not via a ring
                break
            self._ring_if_owed(session_id)
            break
        return RunReport(status=status, turns=turns, failed=failed, dead_lettered=dead)

    def _reclaim(self, session_id: str) -> None:
        """Claims left by a run that died (kill -9, lost lease) go back to the queue, and
        the lost attempt is recorded as a failed turn off the chain, so it stays visible."""
        with self.database.unit_of_work() as uow:
            stale = uow.ledger.queue.reclaim(session_id, max_attempts=self.max_attempts)
            if not stale:
                return
            for epoch in sorted({item.claimed_epoch or 0 for item in stale}):
                lost = [item.id for item in stale if (item.claimed_epoch or 0) == epoch]
                message = (
                    f"the run at epoch {epoch} ended without committing; "
                    f"queue items {', '.join(lost)} were requeued"
                )
                self._failures().record_lost(uow, session_id, epoch, "worker_lost", message)
            uow.commit()
        log.warning("stale_claims_reclaimed", session_id=session_id, items=len(stale))

    def _ring_if_owed(self, session_id: str, *, take_now: bool = False) -> bool:
        """After release, so a ring that found the lease held is never lost (the enqueuer
        committed before ringing; this check runs after it). With `take_now`, work that is
        due now is not rung but reported (True), for the caller to run itself."""
        with self.database.reading() as uow:
            queued = uow.ledger.queue.for_session(session_id, statuses=[QueueStatus.QUEUED])
        if not queued:
            return False
        ready_at = min(item.available_at for item in queued)
        plan = next_work(queued, now_ms=self.clock(), collect_window_ms=self.collect_window_ms)
        due = plan.at_ms if isinstance(plan, WaitUntil) else ready_at
        delay = due - self.clock()
        if delay <= 0:
            if take_now:
                return True
            self.doorbell.session_has_work(session_id)
        else:
            self.doorbell.session_has_work_after(session_id, delay)
        return False

    # -- one turn ----------------------------------------------------------------------------

    def _step(self, session_id: str, *, first: bool = False) -> tuple[str, bool]:
        """One turn: read the queue, claim by queue mode, run, settle. Returns how it went
        and whether more was waiting beside what it claimed."""
        with self.database.unit_of_work() as uow:
            claim = self._look(uow, session_id, stale_first=first)
            if isinstance(claim, str):
                return claim, False  # idle or waiting: nothing claimed
            uow.commit()
        if claim is None:
            # This run holds the lease, so claims it finds belong to a run that died or lost
            # the lease: settle them, then look again.
            self._reclaim(session_id)
            return self._step(session_id)
        if not claim.plan.items:
            return "idle", False
        return self._run_turn(session_id, claim), claim.more

    def _look(self, uow: UnitOfWork, session_id: str, *, stale_first: bool) -> Claim | str | None:
        """Read the queue and claim by queue mode, in the caller's transaction. None, having
        claimed nothing, when `stale_first` and a claim is found that no run holds any more
        (the caller holds the lease): those are settled first."""
        found = uow.ledger.queue.open_for_run(session_id, summary_marker=SUMMARY_PENDING)
        waiting = [item for item, _ in found if item.status in OPEN_QUEUE_STATUSES]
        if stale_first and any(item.status == QueueStatus.CLAIMED for item in waiting):
            return None
        return self._claim(uow, session_id, found, waiting)

    def _claim(
        self,
        uow: UnitOfWork,
        session_id: str,
        found: list[tuple[QueueItemRecord, EventRecord | None]],
        waiting: list[QueueItemRecord],
    ) -> Claim | str:
        """Pick by queue mode and claim under a new epoch, in the caller's transaction."""
        if waiting and waiting[0].status == QueueStatus.CLAIMED:
            # The oldest input is claimed by another run, one that lost the lease without
            # knowing (Redis flushed or restarted): taking a later input would answer out
            # of order. Step aside; that run settles it, or the relay rings if it died.
            return "idle"
        queued = [item for item in waiting if item.status == QueueStatus.QUEUED]
        plan = next_work(queued, now_ms=self.clock(), collect_window_ms=self.collect_window_ms)
        if isinstance(plan, Idle):
            return "idle"
        if isinstance(plan, WaitUntil):
            return "waiting"
        epoch, claimed, read = uow.ledger.snapshots.claim(
            session_id,
            [item.id for item in plan.items],
            lease_ms=self._claim_lease_ms(),
            known=self.turns.contexts.get(session_id),
        )
        events = {item.event_id: event for item, event in found if item.event_id}
        dropped = [(item, event) for item, event in found if item.status == QueueStatus.DROPPED]
        overflow = summarize_overflow(uow, session_id, pending=dropped) if claimed else None
        return Claim(
            plan=dataclasses.replace(plan, items=tuple(claimed)),
            epoch=epoch,
            events=events,
            overflow=overflow,
            more=len(queued) > len(claimed),
            read=read,
        )

    def _failures(self) -> Failures:
        return Failures(
            self.database, self.doorbell, self.coordination, self.clock, self.max_attempts
        )

    def _claim_lease_ms(self) -> int:
        # A claim outlives the longest turn, so the reaper never reclaims a live one.
        return self.turn_time_limit_ms * 2 + 60_000

    def _run_turn(
        self, session_id: str, claim: Claim, *, announce: Sequence[StreamEvent] = ()
    ) -> str:
        """The claimed turn; `announce`, what the router held back for this session's
        stream, goes out with the turn's first publish."""
        epoch, plan, events, overflow = claim.epoch, claim.plan, claim.events, claim.overflow
        # The turn obeys the signals raised at its epoch or later, never one raised before
        # its claim (that one's input is in the queue this turn came from): see `meant_for`.
        started = self.clock()
        signals = RunSignals(
            self.coordination,
            epoch=epoch,
            deadline_ms=started + self.turn_time_limit_ms,
            clock=self.clock,
            holding={item.id for item in plan.items},
            claimed_at_ms=started,
        )
        turns = dataclasses.replace(self.turns, signals=signals)
        if plan.command == COMPACT:
            if announce:
                self.coordination.publish_many(announce)
            return self._compact(session_id, epoch, plan, turns)
        queries = [_query(item, events.get(item.event_id or "")) for item in plan.items]
        if overflow is not None:  # what the queue cap dropped, so the answer can cover it
            queries.insert(0, QueryMessage(text=overflow, source=MessageSource.EVENT))
        consumed = [
            ConsumedItem(queue_item_id=i.id, disposition=plan.disposition) for i in plan.items
        ]
        # The reply's address comes from the event this run read, not a read back.
        source = next((events.get(q.event_id) for q in queries if q.event_id), None)
        shown = self.typing.started(source) if self.typing is not None else None
        holding: AbstractContextManager[list[ReadyReply]] = (
            self.replies.holding() if self.replies is not None else nullcontext([])
        )
        with holding as replies:
            try:
                outcome = turns.run_turn(
                    session_id,
                    queries,
                    epoch=epoch,
                    consumed=consumed,
                    queue_mode=plan.mode,
                    source=source,
                    leading=announce,
                    read=claim.read,
                )
            except Exception as error:  # a bug, or Redis out of reach: it must not wedge it
                log.exception("turn_crashed", session_id=session_id)
                return self._failures().settle(
                    plan, epoch, f"{type(error).__name__}: {error}", crashed=True
                )
            finally:
                self.coordination.settle()  # what the turn posted as it ran is applied
                if self.typing is not None:
                    self.typing.stopped(shown)
        step = self._settle(session_id, epoch, plan, outcome, signals.timed_out)
        if replies and self.replies is not None:
            # The reply leaves with its turn, before the next is claimed: a backlog's replies
            # go out as its turns commit, in turn order, on this thread.
            self.replies.send(replies)
        return step

    def _compact(self, session_id: str, epoch: int, plan: Run, turns: TurnService) -> str:
        """A compaction asked for through the API or CLI, run here under the lease like a
        turn (CompactionService.queued)."""
        try:
            outcome = turns.compaction().queued(
                session_id, plan.items[0], epoch=epoch, disposition=plan.disposition
            )
        except Exception as error:  # say, the summariser's model is unavailable
            log.exception("compaction_crashed", session_id=session_id)
            return self._failures().settle(plan, epoch, f"{type(error).__name__}: {error}")
        return self._fenced(session_id, epoch, plan) if outcome.status == "fenced" else "ran"

    def _fenced(self, session_id: str, epoch: int, plan: Run) -> str:
        """A newer run owns the session: hand back the items this run still holds, for it,
        and the attempt this run's claim counted (it was alive: `attempts.counts`), then
        step aside."""
        with self.database.unit_of_work() as uow:
            requeued, given_back = uow.ledger.queue.hand_back_fenced(
                [i.id for i in plan.items], epoch=epoch
            )
            uow.commit()
        log.info(
            "run_fenced",
            session_id=session_id,
            epoch=epoch,
            requeued=requeued,
            attempts_given_back=given_back,
        )
        return "fenced"

    def _settle(
        self, session_id: str, epoch: int, plan: Run, outcome: TurnOutcome, timed_out: bool
    ) -> str:
        if outcome.status == "committed":
            log.info(
                "turn_committed",
                session_id=session_id,
                turn_id=outcome.turn_id,
                items=len(plan.items),
                mode=plan.mode.value,
                timed_out=timed_out,
            )
            return "ran"
        if outcome.status == "fenced":
            return self._fenced(session_id, epoch, plan)
        error = outcome.result.error if outcome.result is not None else None
        cause = f"{error.kind}: {error.message}" if error is not None else "turn failed"
        return self._failures().settle(plan, epoch, cause)


def _query(item: QueueItemRecord, event: EventRecord | None) -> QueryMessage:
    if event is None:
        return QueryMessage(
            text=str(item.payload.get("text", "")),
            source=item.source or MessageSource.EVENT,
            queue_item_id=item.id,
        )
    return QueryMessage(
        text=event.text or "",
        source=event.source or item.source or MessageSource.HUMAN,
        event_id=event.id,
        queue_item_id=item.id,
        platform=event.platform,
        sender_name=event.sender_name,
        sender_id=event.sender_id,
        occurred_at=event.occurred_at,
        attachments=event.attachments,
        model_overrides=event.model_overrides,
    )
