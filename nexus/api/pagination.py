"""Keyset pagination shared by list routes: `?limit=&cursor=` in, `{items, next_cursor}` out."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel

from nexus.api.errors import ApiError

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_CURSOR_LENGTH = 1024
# What encode_cursor makes, URL-safe base64 (padded or not).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"

T = TypeVar("T")
V = TypeVar("V")
CursorKey = tuple[str | int, ...]


@dataclass(frozen=True)
class PageRequest:
    limit: int
    cursor: str | None


def page_request(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    # The pattern is published, not checked here: decode_cursor refuses what breaks it
    # with 400 invalid_cursor, as it does every cursor this API did not issue.
    cursor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_CURSOR_LENGTH,
            description="The previous page's next_cursor, as given (400 invalid_cursor else)",
            json_schema_extra={"pattern": CURSOR_PATTERN},
        ),
    ] = None,
) -> PageRequest:
    """FastAPI dependency: the page size (out of range is 422) and the raw cursor."""
    return PageRequest(limit=limit, cursor=cursor)


def encode_cursor(key: CursorKey) -> str:
    """An opaque token for the last item's sort key; callers only hand it back."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, shape: Sequence[type]) -> CursorKey | None:
    """The sort key inside `cursor`, checked against `shape` (one type per part); None when
    there is no cursor. Anything that is not a cursor this API made is 400 invalid_cursor."""
    if cursor is None:
        return None
    if not re.fullmatch(CURSOR_PATTERN, cursor):
        raise ApiError(400, "invalid_cursor", "the cursor is not one this API issued")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as error:
        raise ApiError(400, "invalid_cursor", "the cursor is not one this API issued") from error
    # bool is an int to isinstance, and never part of a sort key.
    if (
        not isinstance(key, list)
        or len(key) != len(shape)
        or not all(
            isinstance(part, kind) and not isinstance(part, bool)
            for part, kind in zip(key, shape, strict=True)
        )
    ):
        raise ApiError(400, "invalid_cursor", "the cursor is not one this API issued")
    return tuple(key)


class Page(BaseModel, Generic[V]):
    """One page of a list; `next_cursor` fetches the next (null: this was the last)."""

    items: list[V]
    next_cursor: str | None


def page_body(
    rows: Sequence[T],
    limit: int,
    key_of: Callable[[T], CursorKey],
    view: Callable[[T], V],
) -> Page[V]:
    """The answer for rows fetched with `limit + 1`: the extra row only says a next page
    exists, so the cursor points at the last row shown."""
    shown = rows[:limit]
    more = len(rows) > limit
    return Page[V](
        items=[view(row) for row in shown],
        next_cursor=encode_cursor(key_of(shown[-1])) if more and shown else None,
    )
