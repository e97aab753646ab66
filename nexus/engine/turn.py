"""One turn as an explicit state machine: CallModel → RunTools → CallModel … → End.

Each node does one thing and names the next; the driver loop checks the abort flag at every
stream chunk and every boundary, and injects steering messages before each model call.
Everything the turn produced is accumulated as ledger drafts, so whatever way it ends
(completed, aborted, failed) its partial output can be committed or recorded as it was.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from nexus.engine.context import user_blocks
from nexus.engine.model import (
    ModelDone,
    ModelError,
    ModelPort,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStarted,
)
from nexus.engine.query import QueryMessage
from nexus.engine.signals import TurnSignals
from nexus.engine.stream import DELTA_INTERVAL_S, DeltaCoalescer, LeadingPublisher, StreamPublisher
from nexus.engine.stream_events import (
    MESSAGE_DELTA,
    STEP_ERROR,
    STEP_GENERATED,
    STEP_GENERATING,
    STEP_STARTED,
    STEP_THINKING,
    TOOL_COMPLETED,
    TOOL_STARTED,
    StreamEvent,
)
from nexus.engine.toolbox import Toolbox
from nexus.engine.tools import ToolContext
from nexus.engine.turn_state import TurnState
from nexus.ids import Clock
from nexus.ledger.enums import MessageRole, ToolCallStatus, TurnStatus
from nexus.ledger.records import MessageDraft, TokenUsage, ToolCallDraft

DEFAULT_MAX_TOOL_ITERATIONS = 8
ABORTED_RESULT = "skipped: the turn was aborted before this tool ran"


@dataclass(frozen=True)
class CallModel:
    pass


@dataclass(frozen=True)
class RunTools:
    uses: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class End:
    status: TurnStatus
    stop_reason: str | None = None
    error: ModelError | None = None


Node = CallModel | RunTools | End


@dataclass(frozen=True)
class TurnResult:
    status: TurnStatus
    messages: tuple[MessageDraft, ...]
    tool_calls: tuple[ToolCallDraft, ...]
    usage: TokenUsage
    context_tokens: int | None
    stop_reason: str | None
    error: ModelError | None
    injected: tuple[QueryMessage, ...]
    model_calls: int

    @property
    def overflowed(self) -> bool:
        return self.error is not None and self.error.kind == "context_overflow"

    @property
    def ran_tools(self) -> bool:
        return bool(self.tool_calls)


@dataclass
class TurnMachine:
    """Drives one turn; `run` is the only entry point."""

    model: ModelPort
    toolbox: Toolbox
    signals: TurnSignals
    publisher: StreamPublisher
    clock: Clock
    tool_context: ToolContext
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    delta_interval_s: float = DELTA_INTERVAL_S

    def run(self, request: ModelRequest, queries: tuple[QueryMessage, ...]) -> TurnResult:
        state = TurnState(
            session_id=self.tool_context.session_id,
            request=request,
            # The history's messages are shared, never changed (a node replaces the last one
            # rather than edit it): a new list, not a copy of every message, per turn.
            conversation=list(request.messages),
        )
        state.drafts.extend(query_draft(query) for query in queries)
        node: Node = CallModel()
        while not isinstance(node, End):
            node = (
                self._call_model(state) if isinstance(node, CallModel) else self._tools(state, node)
            )
        return TurnResult(
            status=node.status,
            # No secret a tool was given reaches the ledger, whichever message it ended up in.
            messages=self.toolbox.scrub(tuple(state.drafts)),
            tool_calls=self.toolbox.scrub(tuple(state.tool_calls)),
            usage=state.usage,
            context_tokens=state.context_tokens,
            stop_reason=node.stop_reason,
            error=node.error,
            injected=tuple(state.injected),
            model_calls=state.model_calls,
        )

    # -- nodes -------------------------------------------------------------------------------

    def _call_model(self, state: TurnState) -> Node:
        if self._aborted(state):
            return End(TurnStatus.ABORTED, stop_reason="aborted")
        self._inject_steering(state)
        state.model_calls += 1
        self._publish(state, STEP_STARTED, {"call": state.model_calls})
        request = _with_messages(state.request, state.conversation)
        partial: list[str] = []
        # Progress goes out with the coalesced deltas: at the first streamed event, then at
        # most once per interval, a `step.generating` (with the text since the last one as
        # `message.delta` beside it) in one publish — never one per token.
        deltas = DeltaCoalescer(self.delta_interval_s)
        # Thinking streams as `step.thinking`, joined per interval like the answer's text.
        thoughts = DeltaCoalescer(self.delta_interval_s)
        progress = {"call": state.model_calls, "chars": 0, "tool_uses": 0}
        stream = self.model.stream(request)
        try:
            for event in stream:
                if isinstance(event, TextDelta):
                    partial.append(event.text)
                    progress["chars"] += len(event.text)
                    self._generating(state, progress, deltas.add(event.text))
                elif isinstance(event, ThinkingDelta):
                    self._thinking(state, thoughts.add(event.text))
                elif isinstance(event, ToolUseStarted | ToolInputDelta):
                    # Tool input is acted on only once complete, in ModelDone; meanwhile the
                    # model is still generating, which a watcher may want to know.
                    progress["tool_uses"] += isinstance(event, ToolUseStarted)
                    self._generating(state, progress, deltas.add(""))
                elif isinstance(event, ModelDone):
                    self._thinking(state, thoughts.drain())
                    generated = self._event(
                        state, STEP_GENERATED, {"stop_reason": event.stop_reason}
                    )
                    # Sent with what follows at once (a tool's start, the next call's, the
                    # commit's report), one round trip for both, where the publisher holds.
                    self._flush(state, deltas.drain(), generated, hold=True)
                    return self._answered(state, event)
                if self._aborted(state):
                    self._thinking(state, thoughts.drain())
                    self._flush(state, deltas.drain())
                    return self._keep_partial(state, partial, End(TurnStatus.ABORTED, "aborted"))
        except ModelError as error:
            self._thinking(state, thoughts.drain())
            failed = self._event(state, STEP_ERROR, {"kind": error.kind, "message": error.message})
            self._flush(state, deltas.drain(), failed)
            return self._keep_partial(state, partial, End(TurnStatus.FAILED, error.kind, error))
        finally:
            stream.close()  # aborting closes the HTTP stream; a no-op once finished
        ended = ModelError("model_error", "the stream ended without a final message")
        return self._keep_partial(state, partial, End(TurnStatus.FAILED, ended.kind, ended))

    def _answered(self, state: TurnState, done: ModelDone) -> Node:
        state.add_usage(done.usage)
        # The call's thinking is kept (signature and all) on its first message: the answer's
        # text, else its first tool call, so replay puts it back before them (context.py).
        thinking = [dict(block) for block in done.thinking]
        uses = done.tool_uses
        if done.text or (thinking and not uses):
            state.drafts.append(_assistant_draft(done.text, thinking=thinking))
            thinking = []
        for use in uses:
            content = {"id": use["id"], "name": use["name"], "arguments": use["input"]}
            if thinking:
                content["thinking"], thinking = thinking, []
            state.drafts.append(
                MessageDraft(role=MessageRole.TOOL_CALL, content=content, tool_call_id=use["id"])
            )
        state.append("assistant", [dict(block) for block in done.content])
        if uses:
            return RunTools(uses)
        if self.signals.steer_waiting(state.session_id) and (
            state.model_calls < self.max_tool_iterations
        ):
            # A steer arrived while the final answer streamed and no tool boundary is left:
            # one more model call in this turn takes it (docs/runtime.md, "Queue modes").
            return CallModel()
        return End(TurnStatus.COMPLETED, done.stop_reason)

    def _tools(self, state: TurnState, node: RunTools) -> Node:
        results: list[dict[str, Any]] = []
        for position, use in enumerate(node.uses):
            if self._aborted(state):
                self._skip(state, node.uses[position:], results)
                state.append("user", results)
                return End(TurnStatus.ABORTED, stop_reason="aborted")
            results.append(self._run_tool(state, use))
        state.append("user", results)
        if state.model_calls >= self.max_tool_iterations:
            return End(TurnStatus.COMPLETED, stop_reason="max_tool_iterations")
        return CallModel()

    # -- pieces ------------------------------------------------------------------------------

    def _run_tool(self, state: TurnState, use: dict[str, Any]) -> dict[str, Any]:
        started = self.clock()
        self._publish(state, TOOL_STARTED, {"id": use["id"], "name": use["name"]})
        context = dataclasses.replace(self.tool_context, call_id=use["id"])
        outcome = self.toolbox.execute(use["name"], dict(use.get("input") or {}), context)
        ok = outcome.status == "completed"
        state.tool_calls.append(
            ToolCallDraft(
                provider_call_id=use["id"],
                tool_name=use["name"],
                parameters=dict(use.get("input") or {}),
                result=outcome.result,
                error=outcome.error,
                status=ToolCallStatus.COMPLETED if ok else ToolCallStatus.FAILED,
                started_at=started,
                completed_at=self.clock(),
            )
        )
        state.drafts.append(
            MessageDraft(
                role=MessageRole.TOOL_RESULT,
                content={"result": outcome.result, "error": outcome.error},
                tool_call_id=use["id"],
            )
        )
        self._publish(
            state, TOOL_COMPLETED, {"id": use["id"], "name": use["name"], "status": outcome.status}
        )
        shown = outcome.error if not ok else json.dumps(outcome.result, default=str)
        return {
            "type": "tool_result",
            "tool_use_id": use["id"],
            "content": shown or "",
            "is_error": not ok,
        }

    def _skip(
        self, state: TurnState, uses: tuple[dict[str, Any], ...], results: list[dict[str, Any]]
    ) -> None:
        """Tool calls the model asked for but that never ran still get a result (the API and
        the next context need every tool_use answered)."""
        now = self.clock()
        for use in uses:
            state.tool_calls.append(
                ToolCallDraft(
                    provider_call_id=use["id"],
                    tool_name=use["name"],
                    parameters=dict(use.get("input") or {}),
                    error=ABORTED_RESULT,
                    status=ToolCallStatus.SKIPPED,
                    started_at=now,
                    completed_at=now,
                )
            )
            state.drafts.append(
                MessageDraft(
                    role=MessageRole.TOOL_RESULT,
                    content={"result": None, "error": ABORTED_RESULT},
                    tool_call_id=use["id"],
                )
            )
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use["id"],
                    "content": ABORTED_RESULT,
                    "is_error": True,
                }
            )

    def _keep_partial(self, state: TurnState, partial: list[str], end: End) -> End:
        text = "".join(partial)
        if text:
            state.drafts.append(_assistant_draft(text, partial=True))
        return end

    def _inject_steering(self, state: TurnState) -> None:
        for message in self.signals.take_steering(state.session_id):
            state.injected.append(message)
            state.drafts.append(query_draft(message))
            state.append("user", _query_blocks(message))

    def _aborted(self, state: TurnState) -> bool:
        return self.signals.abort_requested(state.session_id)

    def _publish(self, state: TurnState, event: str, data: dict[str, Any]) -> None:
        # Posted: the turn goes on without waiting for the stream's answer (see post_many).
        self.publisher.post_many([StreamEvent(state.session_id, event, data)])

    def _event(self, state: TurnState, event: str, data: dict[str, Any]) -> StreamEvent:
        return StreamEvent(state.session_id, event, data)

    def _thinking(self, state: TurnState, due: str | None) -> None:
        if due:
            self._publish(state, STEP_THINKING, {"call": state.model_calls, "text": due})

    def _generating(self, state: TurnState, progress: dict[str, int], due: str | None) -> None:
        """`due` is None until the interval has passed; then the text held back (maybe "")."""
        if due is not None:
            self._flush(state, due, self._event(state, STEP_GENERATING, dict(progress)), first=True)

    def _flush(
        self,
        state: TurnState,
        text: str | None,
        *then: StreamEvent,
        first: bool = False,
        hold: bool = False,
    ) -> None:
        """The held-back text as one `message.delta`, with `then` (after it, or before it
        when `first`), in one publish; with `hold`, in the next one where the publisher
        holds events (`LeadingPublisher.hold`)."""
        delta = [self._event(state, MESSAGE_DELTA, {"text": text})] if text else []
        events = [*then, *delta] if first else [*delta, *then]
        if not events:
            return
        if hold and isinstance(self.publisher, LeadingPublisher):
            self.publisher.hold(events)
        else:
            self.publisher.post_many(events)


def _with_messages(request: ModelRequest, conversation: list[dict[str, Any]]) -> ModelRequest:
    return dataclasses.replace(request, messages=tuple(conversation))


def query_draft(query: QueryMessage) -> MessageDraft:
    return MessageDraft(
        role=MessageRole.USER, content=query.content(), source=query.source, event_id=query.event_id
    )


def _query_blocks(query: QueryMessage) -> list[dict[str, Any]]:
    return user_blocks(query.content())


def _assistant_draft(
    text: str, *, partial: bool = False, thinking: list[dict[str, Any]] | None = None
) -> MessageDraft:
    content: dict[str, Any] = {"text": text}
    if partial:
        content["partial"] = True
    if thinking:
        content["thinking"] = thinking
    return MessageDraft(role=MessageRole.ASSISTANT, content=content)
