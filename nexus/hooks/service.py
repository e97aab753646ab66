"""Run the hooks on one event: evaluate in parallel, record every call, route what fired."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import structlog

from nexus.arrival.route import RouteTarget, route
from nexus.arrival.service import DENIED, QUEUED, ArrivalSignals, queue_for
from nexus.arrival.settings import SHIPPED_QUEUE_POLICY, QueuePolicy, arrival
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.model import ModelPort
from nexus.hooks.breaker import COOL_DOWN_MS, Breaker, admit
from nexus.hooks.cron import cron_matches
from nexus.hooks.evaluator import Invocation, evaluate_all
from nexus.hooks.loader import LoadedHook
from nexus.hooks.lookups import SQL_TIMEOUT_MS, HookLookups
from nexus.hooks.pool import HookPool
from nexus.hooks.settle import settle
from nexus.hooks.spec import HookContext, HookResult, Routing
from nexus.ids import Clock, now_ms
from nexus.ledger.enums import (
    BreakerState,
    HookMode,
    HookObligation,
    MessageSource,
    SessionOrigin,
)
from nexus.ledger.hook_lineage import CARRIERS, HOOK_ADAPTER, LINEAGE, lineage_of, merged
from nexus.ledger.records import EventDraft, EventRecord, HookRecord, NewSession, SessionRecord
from nexus.ledger.repository import SessionArchived

log = structlog.get_logger(__name__)
__all__ = ["HOOK_ADAPTER", "HookRunner"]
TIMER_ADAPTER = "timer"
DEFAULT_PERSONA = "atlas"


@dataclass
class HookRunner:
    database: Database
    hooks: Sequence[LoadedHook]
    doorbell: Doorbell
    llm_port: Callable[[], ModelPort] | None = None
    llm_model: str = "scripted"
    clock: Clock = now_ms
    # The hook processes that calls run in (bootstrap always gives one); None runs hooks
    # on threads of this process, for tests of hooks given as functions.
    pool: HookPool | None = None
    # What a firing is queued under (the one way in): the deployment's queue defaults, and
    # the running turn's signals and the session's stream.
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY
    signals: ArrivalSignals | None = None
    # How long one `ctx.sql` query may run before it is cut.
    sql_timeout_ms: int = SQL_TIMEOUT_MS

    def sync(self) -> list[str]:
        """The hooks table follows the loaded directory; returns the hooks it disabled.
        Only an explicit registration calls this (nexus/hooks/registry.py), never a
        worker as it starts."""
        with self.database.unit_of_work() as uow:
            disabled = uow.ledger.hooks.sync(
                [
                    (
                        h.meta.name,
                        h.path,
                        h.meta.description,
                        h.meta.mode.value,
                        h.meta.schedule,
                        h.content_hash,
                    )
                    for h in self.hooks
                ]
            )
            uow.commit()
        return disabled

    def unregistered(self) -> list[str]:
        """Hooks loaded here that the registry does not know as they are (no row, or a
        different file): this worker does not run the new ones until they are registered."""
        if not self.hooks:
            return []
        with self.database.unit_of_work() as uow:
            rows = {row.name: row for row in uow.ledger.hooks.all()}
        return [
            h.meta.name
            for h in self.hooks
            if (row := rows.get(h.meta.name)) is None or row.content_hash != h.content_hash
        ]

    def cool_breakers(self) -> list[str]:
        """The timer's part of the breaker: open breakers past their cool-down go half-open
        now, not only when the next event happens to arrive. Returns the hooks moved."""
        with self.database.unit_of_work() as uow:
            moved = uow.ledger.hooks.half_open_cooled(cool_down_ms=COOL_DOWN_MS)
            uow.commit()
        return moved

    def dry_run(self, name: str, event: EventRecord) -> tuple[Invocation, dict[str, Any] | None]:
        """Evaluate one hook on `event` under its timeout, and change nothing: no invocation
        row, no breaker, no state, no firing (`nexus hooks test`). Returns the invocation
        and its result as JSON."""
        hook = next((h for h in self.hooks if h.meta.name == name), None)
        if hook is None:
            known = ", ".join(sorted(h.meta.name for h in self.hooks)) or "none"
            raise KeyError(f"no hook named {name!r} (loaded: {known})")
        with self.database.reading() as uow:
            row = uow.ledger.hooks.get(name)
        context = self.lookups.context(
            event, name=name, row=row, now_ms=self.clock(), minute_ms=_timer_minute(event)
        )
        [invocation] = evaluate_all([hook], lambda _: context, now_ms=self.clock, pool=self.pool)
        return invocation, _as_json(invocation.result)

    def run(self, event_id: str) -> list[Invocation]:
        """Discharge the event's hook obligation: evaluate every hook that applies and has
        no invocation for it yet, record each call once, and mark the obligation done in
        the same transaction. Any number of runs may be rung for one event (the router,
        the task, the relay): each hook is evaluated on it at most once, however they
        overlap. Returns the invocations this run recorded."""
        if not self.hooks:
            # Nothing loaded in this process: no reason to read the ledger. What the
            # event owes is left to a process that runs hooks.
            return []
        with self.database.unit_of_work() as uow:
            event = uow.ledger.events.get(event_id)
            if event is None or event.hooks_status != HookObligation.DUE:
                # Owes nothing (a hook's own firing, a reply, or stored while no hook was
                # enabled: no loops through what hooks fired), or evaluated already.
                return []
            rows = {row.name: row for row in uow.ledger.hooks.all()}
            invoked = uow.ledger.hooks.invoked(event_id)
            lineage = (
                lineage_of(event.adapter, uow.ledger.events.payload_of(event_id))
                if event.adapter in CARRIERS
                else ()
            )
        minute = _timer_minute(event)
        now = self.clock()
        chosen: list[LoadedHook] = []
        for hook in self.hooks:
            row = rows.get(hook.meta.name)
            if row is None or not row.enabled:
                continue
            if hook.meta.name in invoked or hook.meta.name in lineage:
                continue  # evaluated on this event already; or a firing of its own caused it
            if hook.meta.schedule is not None and (
                minute is None or not cron_matches(hook.meta.schedule, minute)
            ):
                continue  # a scheduled hook sees only its minutes
            if admit(_breaker(row), now)[0]:
                chosen.append(hook)
        if not chosen:
            with self.database.unit_of_work() as uow:
                uow.ledger.events.hooks_done(event_id)
                uow.commit()
            return []
        invocations = evaluate_all(
            chosen,
            lambda hook: self._context(event, rows[hook.meta.name], minute),
            now_ms=self.clock,
            pool=self.pool,
        )
        recorded: list[Invocation] = []
        with self.database.unit_of_work() as uow:
            # Other workers may have run these hooks meanwhile: the outcome is written over
            # their rows as they are now, each held until this commits.
            current = uow.ledger.hooks.lock([i.hook.meta.name for i in invocations])
            for invocation in invocations:
                name = invocation.hook.meta.name
                if name in current and self._settle(
                    uow, event, invocation, rows[name].state, current[name], lineage=lineage
                ):
                    recorded.append(invocation)
            uow.ledger.events.hooks_done(event_id)
            uow.commit()
        return recorded

    @cached_property
    def lookups(self) -> HookLookups:
        """What the hooks' contexts reach: the ledger (search, SQL, themselves), the model."""
        return HookLookups(
            self.database,
            llm_port=self.llm_port,
            llm_model=self.llm_model,
            sql_timeout_ms=self.sql_timeout_ms,
        )

    def _context(self, event: EventRecord, row: HookRecord, minute: int | None) -> HookContext:
        return self.lookups.context(
            event, name=row.name, row=row, now_ms=self.clock(), minute_ms=minute
        )

    def _settle(
        self,
        uow: UnitOfWork,
        event: EventRecord,
        invocation: Invocation,
        state_before: dict[str, Any],
        now_row: HookRecord,
        *,
        lineage: Sequence[str] = (),
    ) -> bool:
        """Record the call and apply its outcome; False, changing nothing, when another run
        recorded this hook's invocation for the event first: its state change and firing
        are that run's, and this one's are discarded (a hook fires at most once per event)."""
        hook = invocation.hook
        now = self.clock()
        result = invocation.result if invocation.error is None else None
        settled = settle(
            now_row,
            state_before=state_before,
            state_after=invocation.state,
            ok=invocation.error is None,
            fired=invocation.fired,
            one_shot=hook.meta.mode == HookMode.ONE_SHOT,
            disable=bool(result and result.disable_hook),
            now_ms=now,
        )
        if not uow.ledger.hooks.record_invocation(
            hook.meta.name,
            event_id=event.id,
            started_at=invocation.started_at,
            latency_ms=invocation.latency_ms,
            fired=settled.fires,
            result=_as_json(result),
            error=invocation.error,
        ):
            log.info("hook_already_invoked", hook=hook.meta.name, event_id=event.id)
            return False
        uow.ledger.hooks.after_call(
            hook.meta.name,
            breaker_state=settled.breaker.state.value,
            consecutive_errors=settled.breaker.consecutive_errors,
            opened_at=settled.breaker.opened_at,
            state=settled.state,
            enabled=settled.enabled,
            fired_at=now if settled.fires else None,
        )
        if invocation.error is not None:
            log.warning(
                "hook_failed",
                hook=hook.meta.name,
                event_id=event.id,
                error=invocation.error,
                breaker=settled.breaker.state.value,
            )
        if settled.fires and result is not None:
            self._fire(uow, event, hook, result, lineage=lineage)
        return True

    def _fire(
        self,
        uow: UnitOfWork,
        event: EventRecord,
        hook: LoadedHook,
        result: HookResult,
        *,
        lineage: Sequence[str] = (),
    ) -> None:
        """A fired hook is an event of its own (deterministic id: firing twice for one event
        is one firing), queued to its target session like any message."""
        fired_id = f"hook:{hook.meta.name}:{event.id}"
        routing = result.routing or Routing()
        source = MessageSource.CRON if event.adapter == TIMER_ADAPTER else MessageSource.TRIGGER
        stored = uow.ledger.events.insert(
            EventDraft(
                id=fired_id,
                adapter=HOOK_ADAPTER,
                platform=event.platform,
                kind="message",
                source=source,
                text=result.prompt or f"hook {hook.meta.name} fired",
                occurred_at=self.clock(),
                payload={
                    "hook": hook.meta.name,
                    "about": event.id,
                    "extracted": dict(result.extracted),
                    # What this firing's answer posts carries it on (nexus/ledger/hook_lineage.py).
                    LINEAGE: merged([lineage, [hook.meta.name]]),
                },
            )
        )
        if not stored:
            return
        session = _target_session(uow, routing, fired_id)
        fired = uow.ledger.events.get(fired_id)
        assert fired is not None  # stored just above, in this transaction
        # The hook's routing chose the mode, as a request would; the rest (cap, drop, the
        # collect window) is the session's, its policy's or the defaults'.
        came = arrival(session, None, fired, self.queueing, mode=routing.queue_mode)
        try:
            queued = queue_for(uow, session, [came], signals=self.signals, doorbell=self.doorbell)
        except SessionArchived as refused:
            uow.ledger.events.mark_processed(fired_id, DENIED, str(refused))
            log.info("hook_fired_refused", hook=hook.meta.name, event_id=event.id, why=str(refused))
            return
        uow.ledger.events.mark_processed(fired_id, QUEUED, f"hook {hook.meta.name}")
        item_id = queued.item_ids[0]
        log.info("hook_fired", hook=hook.meta.name, event_id=event.id, queue_item=item_id)


def _target_session(uow: UnitOfWork, routing: Routing, fired_id: str) -> SessionRecord:
    """Where a hook's firing goes; a session it creates is Nexus's own (origin `system`),
    keyed by the hook's target and made from the fired event."""
    if routing.kind == "session":
        found = uow.ledger.sessions.resolve(routing.target)
        if found is not None:
            return found
        persona = uow.ledger.agents.ensure(DEFAULT_PERSONA)
        return uow.ledger.sessions.ensure(
            NewSession(
                label=routing.target,
                persona_id=persona.id,
                origin=SessionOrigin.SYSTEM,
                routing_key=routing.target,
                source_event_id=fired_id,
            )
        )
    if routing.kind == "persona":
        uow.ledger.agents.ensure(routing.target)
    target = RouteTarget(routing.kind, routing.target)
    return route(uow.ledger, target, source_event_id=fired_id).session


def _breaker(row: HookRecord) -> Breaker:
    return Breaker(BreakerState(row.breaker_state), row.consecutive_errors, row.opened_at)


def _timer_minute(event: EventRecord) -> int | None:
    if event.adapter != TIMER_ADAPTER:
        return None
    return event.occurred_at


def _as_json(result: HookResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    routing = result.routing
    return {
        "fire": result.fire,
        "routing": None
        if routing is None
        else {
            "kind": routing.kind,
            "target": routing.target,
            "queue_mode": routing.queue_mode.value,
        },
        "prompt": result.prompt,
        "extracted": dict(result.extracted),
        "disable_hook": result.disable_hook,
    }
