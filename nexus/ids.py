"""Identifier and clock helpers shared by every layer."""

from __future__ import annotations

import time
from collections.abc import Callable

from ulid import ULID

Clock = Callable[[], int]
"""A source of the current time in Unix milliseconds (injected so tests can fake it)."""


def new_id() -> str:
    """A fresh ULID as 26 sortable characters."""
    return str(ULID())


def now_ms() -> int:
    """The wall clock in Unix milliseconds: the ledger's one time unit."""
    return time.time_ns() // 1_000_000
