"""A manager agent's office for tests: its session, a scripted model, a runner, and the
agent tools wired as in production (dispatch, results back to the parent)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.adapters.scripted import ScriptedModel
from nexus.agents.results import worker_result_hook
from nexus.agents.tools import AgentTools
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.builtin_tools import builtin_registry
from nexus.engine.capabilities import CapabilityRegistry
from nexus.ledger.enums import QueueMode
from nexus.ledger.records import EventDraft, NewQueueItem, NewSession, SessionRecord
from nexus.queueing.coordination import Coordination, InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.turns.service import TurnService
from tests.support import FakeClock


@dataclass
class Office:
    database: Database
    model: ScriptedModel
    runner: SessionRunner
    doorbell: RecordingDoorbell
    manager: SessionRecord


def build_office(
    database: Database,
    clock: FakeClock,
    *,
    max_depth: int = 3,
    coordination: Coordination | None = None,
) -> Office:
    """A manager session whose persona has the agent tools, a scripted model and a runner."""
    doorbell = RecordingDoorbell()
    tools = builtin_registry()
    for tool in AgentTools(database, doorbell, max_depth=max_depth).tools():
        tools.register(tool)
    model = ScriptedModel()
    turns = TurnService(
        database=database,
        model_for=lambda name: model,
        default_model="scripted",
        tools=tools,
        capabilities=CapabilityRegistry(),
        clock=clock,
        commit_hooks=(worker_result_hook(doorbell),),
    )
    registry = CapabilityRegistry()
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        agents = registry.get("agents")
        uow.ledger.agents.set_capabilities(
            persona.id, [(agents.id, agents.name, agents.description, agents.status)]
        )
        manager = uow.ledger.sessions.ensure(
            NewSession(label="dm:ent_boss", persona_id=persona.id, queue_mode=QueueMode.QUEUE)
        )
        uow.commit()
    runner = SessionRunner(
        database=database,
        turns=turns,
        coordination=coordination or InProcessCoordination(),
        doorbell=doorbell,
        clock=clock,
    )
    return Office(database, model, runner, doorbell, manager)


def ask(office: Office, session_id: str, text: str, event_id: str) -> None:
    """Queue a person's message straight into the session's queue."""
    with office.database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(id=event_id, adapter="api", platform="api", text=text, occurred_at=0)
        )
        uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session_id, event_id=event_id, mode=QueueMode.QUEUE)
        )
        uow.commit()


def workers_of(office: Office) -> list[SessionRecord]:
    """Every worker session, oldest first."""
    with office.database.unit_of_work() as uow:
        rows = (
            uow.connection.exec_driver_sql(
                "SELECT id FROM sessions WHERE is_subagent ORDER BY created_at, id"
            )
            .scalars()
            .all()
        )
        found = [uow.ledger.sessions.get(row) for row in rows]
    return [s for s in found if s is not None]
