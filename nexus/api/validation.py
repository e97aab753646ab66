"""Validation errors for people: each bad field named, with what it accepts in plain words.

Pydantic reports a list of dicts (type, loc tuple, msg, input, ctx); an API caller reads
`"drop: must be one of old, new, summarize"` instead, with the structured list beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from nexus.ledger.strings import NO_CONTROL, NO_CONTROL_NOR_SLASH

# What a pattern asks for, in words a person reads (a regular expression is not); a route
# module adds its own patterns here.
PATTERN_WORDS: dict[str, str] = {
    NO_CONTROL: "text without control characters",
    NO_CONTROL_NOR_SLASH: "text without control characters or '/'",
}

# Where FastAPI found the value; the body is the usual place, so it is left unsaid.
_PLACES = {"query", "path", "header", "cookie"}

_KINDS = {
    "missing": "is required",
    "extra_forbidden": "is not a field here (unknown fields are refused)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "decimal_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "datetime_type": "must be a date-time (ISO 8601)",
    "datetime_parsing": "must be a date-time (ISO 8601)",
    "datetime_from_date_parsing": "must be a date-time (ISO 8601)",
    "date_parsing": "must be a date (YYYY-MM-DD)",
    "uuid_parsing": "must be a UUID",
    "none_required": "must be null",
}


class FieldError(BaseModel):
    """One bad field of a request: where, what kind of error (pydantic's), and in words."""

    loc: str  # a dotted path: "body.drop", "query.limit", "body.items.0.name"
    type: str
    message: str


def dotted(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def field_name(loc: Sequence[int | str]) -> str:
    """The field as a caller names it: `drop` for the body's, `limit (query)` otherwise."""
    parts = [str(part) for part in loc]
    if parts and parts[0] == "body":
        return ".".join(parts[1:]) or "body"
    if parts and parts[0] in _PLACES and len(parts) > 1:
        return f"{'.'.join(parts[1:])} ({parts[0]})"
    return ".".join(parts) or "body"


def _choices(expected: object) -> str:
    """`"'old', 'new' or 'summarize'"` (pydantic's) as `old, new, summarize`."""
    text = str(expected).replace(" or ", ", ")
    return ", ".join(choice.strip().strip("'\"") for choice in text.split(","))


def _sized(ctx: Mapping[str, Any], key: str, word: str, unit: str) -> str:
    return f"must be {word} {ctx.get(key)} {unit}"


def plain(error: Mapping[str, Any]) -> str:
    """What one pydantic error says about its field, in words, without the field's name."""
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    msg = str(error.get("msg", "is not valid"))
    if kind in _KINDS:
        return _KINDS[kind]
    if kind in ("literal_error", "enum"):
        return f"must be one of {_choices(ctx.get('expected', ''))}"
    if kind == "string_too_short":
        least = ctx.get("min_length")
        return (
            "must not be empty"
            if least == 1
            else _sized(ctx, "min_length", "at least", "characters")
        )
    if kind == "string_too_long":
        return _sized(ctx, "max_length", "at most", "characters")
    if kind == "too_short":
        return _sized(ctx, "min_length", "at least", "items")
    if kind == "too_long":
        return _sized(ctx, "max_length", "at most", "items")
    bounds = {
        "greater_than_equal": ("ge", "at least"),
        "less_than_equal": ("le", "at most"),
        "greater_than": ("gt", "more than"),
        "less_than": ("lt", "less than"),
    }
    if kind in bounds:
        key, word = bounds[kind]
        return f"must be {word} {ctx.get(key)}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern"))
        return (
            f"must be {PATTERN_WORDS[pattern]}"
            if pattern in PATTERN_WORDS
            else (f"must match the pattern {pattern}")
        )
    if kind == "json_invalid":
        return f"is not valid JSON ({ctx.get('error', msg)})"
    if kind in ("value_error", "assertion_error"):
        return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    # Pydantic's own sentence, turned to speak of the field rather than "Input".
    return msg.replace("Input should be", "must be", 1)


def field_errors(errors: Sequence[Mapping[str, Any]]) -> list[FieldError]:
    """The structured list, JSON-safe: no input (it may be large or secret), no ctx."""
    found: list[FieldError] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if error.get("type") == "json_invalid":
            loc = ("body",)  # pydantic puts the character offset here, not a field
        found.append(FieldError(loc=dotted(loc), type=str(error.get("type")), message=plain(error)))
    return found


def summary(errors: Sequence[Mapping[str, Any]]) -> str:
    """One line naming each bad field: `drop: must be one of old, new, summarize; cap: ...`."""
    lines: list[str] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        name = "body" if error.get("type") == "json_invalid" else field_name(loc)
        line = f"{name}: {plain(error)}"
        if line not in lines:
            lines.append(line)
    return "; ".join(lines) or "the request is not valid"
