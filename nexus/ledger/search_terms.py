"""What a full-text search matches on (pure): the terms worth matching in a text, and one
hit. The search itself, through each database's index, is `nexus.ledger.repository.search`."""

from __future__ import annotations

import re
from typing import NamedTuple

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
# Words that match everywhere and say nothing about which conversation is meant.
_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "and",
        "or",
        "for",
        "of",
        "to",
        "in",
        "on",
        "at",
        "is",
        "are",
        "was",
        "were",
        "be",
        "it",
        "this",
        "that",
        "with",
        "from",
        "by",
        "as",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "i",
        "about",
        "please",
        "can",
        "could",
        "would",
        "should",
        "what",
        "which",
        "who",
        "how",
    }
)


class SearchHit(NamedTuple):
    """One message that matched one term: the session its turn was made in, and the turn."""

    term: str
    session_id: str
    turn_id: str


def search_terms(query: str) -> list[str]:
    """The words worth matching on, lower-cased, stop words out, order kept, no repeats."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in _STOP:
            seen.setdefault(word, None)
    return list(seen)
