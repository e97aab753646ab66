"""The manager/worker tools: agent_send, reply_to_caller, send_message_to_agent,
get_agent_status. Their writes are effects: they land with the turn that asked, or never."""

from __future__ import annotations

from typing import Any

from nexus.access.keys import worker_key
from nexus.agents.dispatch import (
    TARGET_SHAPE,
    BadTarget,
    ForkTask,
    SessionTask,
    SpawnWorker,
    promised_labels,
    read_target,
)
from nexus.agents.dispatched import Dispatched, dispatched_page
from nexus.agents.labels import FORK_PREFIX, WORKER_PREFIX, first_free, hinted_label
from nexus.agents.posting import post
from nexus.agents.results import TASK_EVENT_PREFIX, deliver
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure
from nexus.ids import new_id
from nexus.ledger.enums import QueueStatus, SessionStatus, TaskStatus
from nexus.ledger.records import SessionRecord, check_new_label

DEFAULT_MAX_DEPTH = 3
# How many of a manager's workers get_agent_status shows.
STATUS_WORKERS = 20
AGENT_TOOL_NAMES = ("agent_send", "reply_to_caller", "send_message_to_agent", "get_agent_status")


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _status_entry(entry: Dispatched) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "session": entry.session.label,
        "task": entry.task_description,
        "task_status": entry.task_status,
    }
    if entry.task_id is not None:  # a tracked task to a session it did not spawn
        shown.update(kind=entry.kind, task_id=entry.task_id)
    return shown


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
                    "Dispatch a task (op=dispatch) to a new worker agent (the default "
                    "target), to an existing session, or to a fork of a turn; its answer "
                    "comes back to you as a [worker_result]. Or message an existing session "
                    "(op=message), with no answer tracked.",
                    _object(
                        {
                            "op": {"type": "string", "enum": ["dispatch", "message"]},
                            "text": {"type": "string"},
                            "target": {"type": "object", "description": TARGET_SHAPE},
                            "persona": {
                                "type": "string",
                                "description": "a new worker only: its persona by name; "
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
        try:
            target = read_target(arguments)
        except BadTarget as error:
            raise ToolFailure(str(error)) from error
        if arguments["op"] == "message":
            if target.kind != "session" or target.value is None:
                raise ToolFailure(
                    'op "message" goes to an existing session: target {"session": label}'
                )
            return self._message(context, target.value, text)
        if target.kind == "session" and target.value is not None:
            return self._dispatch_to_session(context, target.value, text)
        if target.kind == "fork" and target.value is not None:
            return self._fork(context, target.value, text, target.label_hint)
        return self._dispatch(context, text, target.persona, target.label_hint)

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
            # A manager sees where its workers and tasks stand (the first few; the API
            # lists them all).
            spawned = dispatched_page(uow.ledger, session.label, after=None, limit=STATUS_WORKERS)
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
            "workers": [_status_entry(entry) for entry in spawned],
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
        """A worker inherits its manager's persona unless the dispatch names one (docs/hooks.md)."""
        if name is None:
            return me.persona_id
        with self._database.unit_of_work() as uow:
            found = uow.ledger.agents.get_by_name(name)
        if found is None:
            raise ToolFailure(f"no persona {name!r}; leave persona out to use yours")
        return found.id

    def _new_label(self, context: ToolContext, prefix: str, hint: str | None, default: str) -> str:
        """The new session's label: from the hint if it leaves anything (made unique among
        the ledger's labels and those this turn promised already), else `default`."""
        wanted = hinted_label(prefix, hint) if hint is not None else None
        if wanted is None:
            return default
        promised = promised_labels(context.effects)
        with self._database.unit_of_work() as uow:

            def taken(label: str) -> bool:
                return label in promised or uow.ledger.sessions.resolve(label) is not None

            label = first_free(wanted, taken, new_id().lower())
        try:
            return check_new_label(label)
        except ValueError as error:  # cannot happen for a sanitised hint; said plainly if so
            raise ToolFailure(f"labelHint {hint!r} gives no usable label: {error}") from error

    def _dispatch(
        self,
        context: ToolContext,
        text: str,
        persona: str | None = None,
        hint: str | None = None,
    ) -> Any:
        me = self._session(context.session_id)
        persona_id = self._worker_persona(me, persona)
        depth = self._depth(me) + 1
        if self._max_depth and depth > self._max_depth:
            raise ToolFailure(
                f"dispatch refused: a worker here would be at depth {depth}, and the limit is "
                f"{self._max_depth} (NEXUS_MAX_WORKER_DEPTH; 0 = unlimited)"
            )
        label = self._new_label(context, WORKER_PREFIX, hint, worker_key(new_id()))
        context.effects.append(
            SpawnWorker(self._doorbell, me, context.call_id, label, persona_id, text)
        )
        return {"dispatched": label, "depth": depth}

    def _target(self, context: ToolContext, label: str) -> SessionRecord:
        """The session `label` names, if it may take a message from this one."""
        with self._database.unit_of_work() as uow:
            target = uow.ledger.sessions.resolve(label)
        if target is None:
            raise ToolFailure(f"no session {label!r}")
        if target.status != SessionStatus.ACTIVE:
            # As the API and the router refuse it: a cancelled worker takes no new work.
            cancelled = target.task_status == TaskStatus.CANCELLED
            why = "was cancelled" if cancelled else f"is {target.status}"
            raise ToolFailure(f"session {target.label!r} {why}: it takes no new messages")
        if target.id == context.session_id:
            raise ToolFailure(f"session {target.label!r} is this session: send to another")
        return target

    def _message(self, context: ToolContext, label: str, text: str) -> Any:
        target = self._target(context, label)
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

    def _dispatch_to_session(self, context: ToolContext, label: str, text: str) -> Any:
        target = self._target(context, label)
        me = self._session(context.session_id)
        task_id = f"{TASK_EVENT_PREFIX}{new_id()}"
        context.effects.append(
            SessionTask(self._doorbell, me, context.call_id, target, task_id, text)
        )
        return {"dispatched": target.label, "task": task_id}

    def _fork(self, context: ToolContext, turn_id: str, text: str, hint: str | None) -> Any:
        with self._database.unit_of_work() as uow:
            forkable = uow.ledger.sessions.fork_point(turn_id) is not None
        if not forkable:
            raise ToolFailure(
                f"turn {turn_id!r} cannot be forked: it is on no session's chain (unknown, "
                "failed or superseded)"
            )
        me = self._session(context.session_id)
        label = self._new_label(context, FORK_PREFIX, hint, f"{FORK_PREFIX}{new_id()}")
        task_id = f"{TASK_EVENT_PREFIX}{new_id()}"
        context.effects.append(
            ForkTask(self._doorbell, me, context.call_id, label, turn_id, task_id, text)
        )
        return {"forked": label, "task": task_id}
