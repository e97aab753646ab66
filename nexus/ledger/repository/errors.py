"""Errors the ledger raises; each says what was wrong in words a caller can show."""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error the repository raises on purpose."""


class NotFound(LedgerError):
    """The row asked for does not exist."""


class LabelTaken(LedgerError):
    """A session (or alias) with that label exists already."""


class NotForkable(LedgerError):
    """The turn is not on any chain (failed or superseded) and cannot be a fork point."""


class LedgerConflict(LedgerError):
    """The ledger would break an invariant (e.g. consume a queue item twice); nothing written."""


class SessionArchived(LedgerError):
    """The session is archived: readable, forkable, but it takes no new work."""


class SessionDeleted(SessionArchived):
    """The session is deleted: its history stays readable, it takes no work, and its label
    is free for a new session."""
