"""The bodies of /v1/sessions: what a caller sends and what each route answers."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nexus.api.schemas.model import ModelConfigBody, ModelSettingsView
from nexus.arrival.messages import DEFAULT_PERSONA
from nexus.ledger.enums import MAX_DEBOUNCE_MS, DropPolicy, MessageSource, QueueMode
from nexus.ledger.records import (
    NewSessionLabel,
    QueueItemRecord,
    SessionRecord,
    StorableText,
    TurnView,
)
from nexus.ledger.strings import PersonaName
from nexus.queueing.pending import Place
from nexus.queueing.settings import Source

T = TypeVar("T")
MAX_MESSAGE_CHARS = 100_000
MAX_TITLE_CHARS = 200
MAX_TAGS = 32
SessionTag = Annotated[
    StorableText, Field(min_length=1, max_length=64, pattern=r"^[^\s,]+$")
]  # one word: no spaces, no commas (the CLI takes them comma-separated)
# What an API caller may say a message comes from. agent, cron, trigger and event are
# Nexus's own origins: their answers go where the session last heard from a person.
CALLER_SOURCES = (MessageSource.HUMAN, MessageSource.WEBHOOK)


def _check_caller_source(value: MessageSource) -> MessageSource:
    if value not in CALLER_SOURCES:
        allowed = " or ".join(repr(str(source)) for source in CALLER_SOURCES)
        raise ValueError(f"source {str(value)!r} is Nexus's own; an API caller sends {allowed}")
    return value


CallerSource = Annotated[MessageSource, AfterValidator(_check_caller_source)]


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: NewSessionLabel
    persona: PersonaName = DEFAULT_PERSONA
    queue_mode: QueueMode | None = None


class SessionView(SessionRecord):
    """A session, with its persona's name and the labels that alias to it."""

    persona: str | None
    aliases: list[str]


class SettingView(BaseModel, Generic[T]):
    value: T
    source: Source  # "session", "policy" (the access policy its messages match) or "default"


class QueueSettingsView(BaseModel):
    """The settings a message arriving now would be queued under. A mode of null means no
    layer chose one: each message's source does (interrupt for people, followup for
    automation)."""

    mode: SettingView[QueueMode | None]
    cap: SettingView[int]
    drop: SettingView[DropPolicy]
    debounce_ms: SettingView[int]
    policy: str | None  # the access policy its latest platform message matched


class RunningView(BaseModel):
    """The turn a session runs now (from its stream; while its lease is held)."""

    turn_id: str | None
    worker: str | None  # host:pid
    started_at: int | None
    step: str | None  # "starting", "model call N", "tool NAME"


class PendingView(BaseModel):
    count: int  # open items: waiting, or claimed by the running turn
    oldest_age_ms: int | None


class SessionDetail(SessionView):
    """One session as GET and PATCH /v1/sessions/{label} show it."""

    queue: QueueSettingsView
    running: RunningView | None
    pending: PendingView
    # What its next turn would run with (model_overrides above are the session's own);
    # null, with the reason in model_settings_error, when the layers no longer fit together.
    model_settings: ModelSettingsView | None = None
    model_settings_error: str | None = None


class SessionSettings(BaseModel):
    """What PATCH changes: a field left out stays as it is; `null` clears the session's own
    setting, so its policy's or the deployment's applies again."""

    model_config = ConfigDict(extra="forbid")

    queue_mode: QueueMode | None = None
    cap: Annotated[int, Field(ge=1, le=10_000)] | None = None
    drop: DropPolicy | None = None
    debounce_ms: Annotated[int, Field(ge=0, le=MAX_DEBOUNCE_MS)] | None = None
    archived: bool | None = None
    # `model_config` in JSON (pydantic keeps the name for itself): the fields given replace
    # the session's own, a null field clears one, `model_config: null` clears them all.
    model_overrides: ModelConfigBody | None = Field(default=None, alias="model_config")
    # What a person calls the session and files it under (`null`: none).
    title: Annotated[StorableText, Field(min_length=1, max_length=MAX_TITLE_CHARS)] | None = None
    tags: Annotated[list[SessionTag], Field(max_length=MAX_TAGS)] | None = None


class SendMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: StorableText = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    mode: QueueMode | None = None
    persona: PersonaName | None = None
    source: CallerSource = MessageSource.HUMAN
    # `model_config` in JSON: the model configuration of the turn that answers this message.
    model_overrides: ModelConfigBody | None = Field(default=None, alias="model_config")


class Queued(BaseModel):
    """A message is queued: its answer is a turn, read from /turns or the stream."""

    event_id: str
    queue_item_id: str
    session: str
    mode: QueueMode


class SessionThread(BaseModel):
    session: str
    turns: list[TurnView]


class AbortRequested(BaseModel):
    session: str
    abort_requested: bool


class CompactRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instructions: str | None = Field(default=None, max_length=4000)


class CompactQueued(BaseModel):
    """The compaction is queued: the session's runner carries it out in queue order, under
    its lease; the queue item's disposition (and `consumed_by_turn_id`) tells the outcome."""

    status: str  # queued
    session: str
    queue_item_id: str


class QueueItemView(BaseModel):
    id: str
    event_id: str | None
    mode: str
    status: str
    disposition: str | None
    detail: str | None
    attempts: int
    enqueued_at: int
    consumed_by_turn_id: str | None
    # What the item carries besides its event (say, a notice's kind).
    payload: dict[str, Any] = Field(default_factory=dict)
    position: int | None = None  # in line among the open items (1: next, or running)
    age_ms: int | None = None  # how long an open item has waited

    @classmethod
    def of(cls, item: QueueItemRecord, place: Place | None = None) -> QueueItemView:
        return cls(
            position=place.position if place else None,
            age_ms=place.age_ms if place else None,
            id=item.id,
            event_id=item.event_id,
            mode=item.mode.value,
            status=item.status.value,
            disposition=item.disposition.value if item.disposition else None,
            detail=item.disposition_detail,
            attempts=item.attempts,
            enqueued_at=item.enqueued_at,
            consumed_by_turn_id=item.consumed_by_turn_id,
            payload=item.payload,
        )


class QueueView(BaseModel):
    session: str
    items: list[QueueItemView]


class Branch(BaseModel):
    kind: str  # worker | fork | abandoned (a head a rollback left: `head`)
    session: str
    task: str | None
    head: str | None = None  # abandoned: the head the session had before rolling back here


class RollbackRequest(BaseModel):
    """POST /v1/sessions/{label}/rollback: the turn to go back to; `abort` stops a turn
    that runs (the rollback is then refused, to be retried once it stopped)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str = Field(min_length=1, max_length=26)
    abort: bool = False


class RolledBackView(BaseModel):
    session: str
    head: str | None
    previous_head: str | None
    moved: bool  # false: the turn was the head already


class TreeTurn(BaseModel):
    id: str
    session: str  # "this", or the session the turn was made in (a fork's first parent)
    type: str
    status: str
    query: str | None
    answer: str | None
    summary: str | None  # a compaction's summary, first line; None for other turns
    thinking: str | None = None  # the turn's first extended thinking, shortened
    branches: list[Branch]


class SessionTree(BaseModel):
    session: str
    parent: str | None
    parent_turn: str | None
    head: str | None
    turns: list[TreeTurn]
    running: RunningView | None = None  # a turn on its way: a child of `head` once committed
