"""The manager/worker tools: agent_send, reply_to_caller, send_message_to_agent,
get_agent_status. Their writes are effects: they land with the turn that asked, or never."""

from __future__ import annotations

from typing import Any

from nexus.access.keys import worker_key
from nexus.agents.posting import post
from nexus.agents.results import deliver
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure
from nexus.ids import new_id
from nexus.ledger.enums import QueueStatus, SessionOrigin, SessionStatus, TaskStatus
from nexus.ledger.records import NewSession, SessionRecord

DEFAULT_MAX_DEPTH = 3
# How many of a manager's workers get_agent_status shows.
STATUS_WORKERS = 20
AGENT_TOOL_NAMES = ("agent_send", "reply_to_caller", "send_message_to_agent", "get_agent_status")


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


class AgentTools:
    def __init__(
        self, database: Database, doorbell: Doorbell | None, *, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> None:
        self._database = database
        self._doorbell = doorbell
        self._max_depth = max_depth

    def tools(self) -> list[Tool]:
        return [
            Tool(
                ToolSpec(
                    "agent_send",
                    "Dispatch a task to a new worker agent (op=dispatch), "
                    "or message an existing session (op=message).",
                    _object(
                        {
                            "op": {"type": "string", "enum": ["dispatch", "message"]},
                            "text": {"type": "string"},
                            "target": {
                                "type": "object",
                                "description": '{"new_session": true} | {"session": label} | '
                                '{"fork": turn_id}',
                            },
                            "persona": {
                                "type": "string",
                                "description": "dispatch only: the worker's persona by name; "
                                "by default it is yours (identity and permissions)",
                            },
                        },
                        ["op", "text"],
                    ),
                ),
                self.agent_send,
            ),
            Tool(
                ToolSpec(
                    "reply_to_caller",
                    "Send your result to the agent that dispatched you.",
                    _object({"text": {"type": "string"}}, ["text"]),
                ),
                self.reply_to_caller,
            ),
            Tool(
                ToolSpec(
                    "send_message_to_agent",
                    "Queue a message to another session.",
                    _object({"to": {"type": "string"}, "text": {"type": "string"}}, ["to", "text"]),
                ),
                self.send_message_to_agent,
            ),
            Tool(
                ToolSpec(
                    "get_agent_status",
                    "The state of a worker or any session: its task and task_status "
                    "(pending, running, completed, failed, cancelled) and its own workers'.",
                    _object({"session": {"type": "string"}}, ["session"]),
                ),
                self.get_agent_status,
            ),
        ]

    # -- tools -------------------------------------------------------------------------------

    def agent_send(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        text = str(arguments["text"])
        target = arguments.get("target") or {"new_session": True}
        if not isinstance(target, dict):
            raise ToolFailure("target must be an object: {new_session|session|fork}")
        if arguments["op"] == "message" or "session" in target:
            return self._message(context, str(target.get("session", "")), text)
        if "fork" in target:
            return self._fork(context, str(target["fork"]), text)
        persona = arguments.get("persona")
        return self._dispatch(context, text, str(persona) if persona else None)

    def reply_to_caller(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        me = self._session(context.session_id)
        if not me.is_subagent:
            raise ToolFailure("reply_to_caller works in a worker session; this one has no caller")
        text = str(arguments["text"])

        def effect(uow: UnitOfWork, turn_id: str) -> None:
            lineage = uow.ledger.events.hook_lineage(turn_id=turn_id)
            deliver(uow, self._doorbell, me, turn_id, text, lineage=lineage)

        context.effects.append(effect)
        return {"sent_to": me.parent_session_label}

    def send_message_to_agent(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return self._message(context, str(arguments["to"]), str(arguments["text"]))

    def get_agent_status(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        label = str(arguments["session"])
        with self._database.unit_of_work() as uow:
            session = uow.ledger.sessions.resolve(label)
            if session is None:
                raise ToolFailure(f"no session {label!r}")
            open_items = uow.ledger.queue.for_session(
                session.id, statuses=[QueueStatus.QUEUED, QueueStatus.CLAIMED]
            )
            head = uow.ledger.threads.get_turn(session.thread_id) if session.thread_id else None
            # A manager sees where its workers stand (the first few; the API lists them all).
            spawned = uow.ledger.workers.page(session.label, after=None, limit=STATUS_WORKERS)
        last = None
        if head is not None:
            texts = [m.content.get("text") for m in head.messages if m.role.value == "assistant"]
            last = texts[-1] if texts else None
        return {
            "session": session.label,
            "task": session.task_description,
            "task_status": session.task_status,
            "parent": session.parent_session_label,
            "turns_pending": len(open_items),
            "last_turn_status": head.turn.status.value if head else None,
            "last_answer": last,
            "workers": [
                {"session": w.label, "task": w.task_description, "task_status": w.task_status}
                for w in spawned
            ],
        }

    # -- pieces ------------------------------------------------------------------------------

    def _session(self, session_id: str) -> SessionRecord:
        with self._database.unit_of_work() as uow:
            found = uow.ledger.sessions.get(session_id)
        if found is None:
            raise ToolFailure("this session no longer exists")
        return found

    def _depth(self, session: SessionRecord) -> int:
        depth, label = 0, session.parent_session_label
        with self._database.unit_of_work() as uow:
            while label is not None and depth < 100:
                depth += 1
                parent = uow.ledger.sessions.resolve(label)
                label = parent.parent_session_label if parent else None
        return depth

    def _worker_persona(self, me: SessionRecord, name: str | None) -> str:
        """Seed 000: a worker inherits its manager's persona unless the dispatch names one."""
        if name is None:
            return me.persona_id
        with self._database.unit_of_work() as uow:
            found = uow.ledger.agents.get_by_name(name)
        if found is None:
            raise ToolFailure(f"no persona {name!r}; leave persona out to use yours")
        return found.id

    def _dispatch(self, context: ToolContext, text: str, persona: str | None = None) -> Any:
        me = self._session(context.session_id)
        persona_id = self._worker_persona(me, persona)
        depth = self._depth(me) + 1
        if self._max_depth and depth > self._max_depth:
            raise ToolFailure(
                f"dispatch refused: a worker here would be at depth {depth}, and the limit is "
                f"{self._max_depth} (NEXUS_MAX_WORKER_DEPTH; 0 = unlimited)"
            )
        label = worker_key(new_id())
        call_id = context.call_id

        def effect(uow: UnitOfWork, turn_id: str) -> None:
            # The dispatching call names its worker (seed 002's forward lookup: "what workers
            # did this turn spawn?"), in the commit that creates it.
            spawned = uow.ledger.workers.record_spawn
            tool_call = spawned(turn_id, call_id, label) if call_id else None
            worker = uow.ledger.sessions.create(
                NewSession(
                    label=label,
                    persona_id=persona_id,
                    origin=SessionOrigin.SUBAGENT,
                    parent_session_label=me.label,
                    parent_turn_id=turn_id,
                    spawn_tool_call_id=tool_call,
                    task_description=text,
                ),
                reason="dispatch",
            )
            post(
                uow,
                self._doorbell,
                session_id=worker.id,
                event_id=f"agent:{label}:task",
                text=text,
                payload={"kind": "task", "from": me.label},
                lineage=uow.ledger.events.hook_lineage(turn_id=turn_id),
            )

        context.effects.append(effect)
        return {"dispatched": label, "depth": depth}

    def _message(self, context: ToolContext, label: str, text: str) -> Any:
        with self._database.unit_of_work() as uow:
            target = uow.ledger.sessions.resolve(label)
        if target is None:
            raise ToolFailure(f"no session {label!r}")
        if target.status == SessionStatus.ARCHIVED:
            # As the API and the router refuse it: a cancelled worker takes no new work.
            why = "was cancelled" if target.task_status == TaskStatus.CANCELLED else "is archived"
            raise ToolFailure(f"session {target.label!r} {why}: it takes no new messages")
        me = self._session(context.session_id)
        event_id = f"agent:{me.label}:{context.call_id or new_id()}"

        def effect(uow: UnitOfWork, turn_id: str) -> None:
            post(
                uow,
                self._doorbell,
                session_id=target.id,
                event_id=event_id,
                text=text,
                payload={"kind": "message", "from": me.label},
                lineage=uow.ledger.events.hook_lineage(turn_id=turn_id),
            )

        context.effects.append(effect)
        return {"sent_to": target.label}

    def _fork(self, context: ToolContext, turn_id: str, text: str) -> Any:
        label = f"fork-{new_id()}"

        def effect(uow: UnitOfWork, posting_turn: str) -> None:
            forked = uow.ledger.sessions.fork(turn_id, label=label)
            post(
                uow,
                self._doorbell,
                session_id=forked.id,
                event_id=f"agent:{label}:task",
                text=text,
                payload={"kind": "task", "from": context.session_label},
                lineage=uow.ledger.events.hook_lineage(turn_id=posting_turn),
            )

        context.effects.append(effect)
        return {"forked": label}
