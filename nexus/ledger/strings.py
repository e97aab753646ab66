"""The strings a caller names things by (ids, labels, names) and the free text it sends, as
types: one rule for every route, in path, query and body.

A key (`Annotated[str, Key(...)]`) is 1 to N characters, N its column's length, read from
the table itself; no control character (NUL, CR, LF, ...: Postgres holds no NUL, and none
has a place in a name); valid Unicode (no lone surrogate, which JSON's "\\ud800" decodes to
and no database encoding holds). Pydantic checks exactly the constraints the OpenAPI
document publishes (`minLength`, `maxLength`, `pattern`), so a value the ledger could not
hold is a 422 naming the field, never a database error. The pattern does not spell out the
surrogates: JSON Schema validators built on Rust's regex cannot compile them; pydantic
refuses every lone surrogate in a constrained string all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs
from sqlalchemy import String

from nexus.ledger.models import metadata

# Anything but a control character; with `/` also out, what a new session label may hold.
NO_CONTROL = r"^[^\x00-\x1f\x7f]+$"
NO_CONTROL_NOR_SLASH = r"^[^\x00-\x1f\x7f/]+$"
_RULE = "without control characters (NUL, CR, LF, ...) or lone surrogates"


def column_length(table: str, column: str) -> int:
    """The length a string column holds: what a key stored there may be at most."""
    kind = metadata.tables[table].c[column].type
    assert isinstance(kind, String) and kind.length, f"{table}.{column} is no bounded string"
    return kind.length


@dataclass(frozen=True)
class Key:
    """`Annotated[str, Key(64, "an entity id")]`: a key of at most `max_length` characters
    matching `pattern`; refused with one sentence that says the rule."""

    max_length: int
    what: str
    pattern: str = NO_CONTROL
    also: str = ""  # the rule beyond NO_CONTROL, in words

    @classmethod
    def of(cls, table: str, column: str, what: str, **rules: str) -> Key:
        return cls(column_length(table, column), what, **rules)

    @property
    def message(self) -> str:
        return f"{self.what} is a string of 1 to {self.max_length} characters {_RULE}{self.also}"

    def __get_pydantic_core_schema__(
        self, _source: Any, _handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        checked = cs.str_schema(min_length=1, max_length=self.max_length, pattern=self.pattern)
        # One sentence for every way a value breaks the rule (pydantic's own would quote
        # the regular expression); the JSON schema is still the inner one's.
        return cs.custom_error_schema(
            checked, custom_error_type="string_rules", custom_error_message=self.message
        )


# A session's label (an existing one may hold `/`: a platform's key, group:github:o/name).
SessionLabel = Annotated[str, Key.of("sessions", "label", "a session label")]
# A label a caller chooses: in a URL /v1/sessions/a/turns could not tell the session
# `a/turns` from the turns of `a`, so a new label has no `/`.
NewSessionLabel = Annotated[
    str,
    Key.of(
        "sessions",
        "label",
        "a new session label",
        pattern=NO_CONTROL_NOR_SLASH,
        also=", nor '/' (in /v1/sessions/{label}/... it would read as a path)",
    ),
]
_NEW_LABEL: TypeAdapter[str] = TypeAdapter(NewSessionLabel)


def check_new_label(value: str) -> str:
    """The rule of NewSessionLabel, for a label that arrives as a plain string (a session
    created by its first message); ValueError with the rule otherwise."""
    try:
        return _NEW_LABEL.validate_python(value)
    except ValidationError as error:
        raise ValueError(error.errors()[0]["msg"]) from None


# The ids the ledger makes (ULIDs, `ent_…`) and the names callers give, by their columns.
AgentId = Annotated[str, Key.of("agents", "id", "an agent id")]
PersonaName = Annotated[str, Key.of("agents", "name", "a persona name")]
ModelName = Annotated[str, Key.of("agents", "default_model", "a model name")]
CapabilityId = Annotated[str, Key.of("capabilities", "id", "a capability id")]
TurnId = Annotated[str, Key.of("turns", "id", "a turn id")]
QueueItemId = Annotated[str, Key.of("queue_items", "id", "a queue item id")]
EntityId = Annotated[str, Key.of("entities", "id", "an entity id")]
EntityKind = Annotated[str, Key.of("entities", "type", "an entity kind")]
Platform = Annotated[str, Key.of("contacts", "platform", "a platform")]
SenderId = Annotated[str, Key.of("contacts", "sender_id", "a sender id")]
EventId = Annotated[str, Key.of("events", "id", "an event id")]
AdapterName = Annotated[str, Key.of("events", "adapter", "an adapter name")]
HookName = Annotated[str, Key.of("hooks", "name", "a hook name")]


def _check_storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text cannot contain NUL (U+0000): the ledger cannot store it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text cannot contain a lone surrogate: it is no Unicode") from None
    return value


# Free text a caller sends (message content, display names): anything but NUL, which
# Postgres text columns cannot hold, and lone surrogates, which no encoding holds; refused
# with the field's name, not a 500.
StorableText = Annotated[str, AfterValidator(_check_storable)]
