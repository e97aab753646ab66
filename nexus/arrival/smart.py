"""Smart routing's scoring (pure): which session's recent messages share most of the
content's terms.

The search (`SearchRepository.recent_hits`) reads, through the full-text index, the newest
`PER_TERM` messages matching each of the content's `MAX_TERMS` longest terms: at most
MAX_TERMS * PER_TERM rows whatever the ledger's size. Each session then scores the share
of the terms its messages matched (term overlap, 0 to 1); ties go to more matching messages,
then to the session that matched most recently. A match must share at least two terms,
or half of them, so one common word does not pull a message away from its target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.ledger.search_terms import SearchHit, search_terms

MAX_TERMS = 8  # the longest words say the most about which conversation is meant
PER_TERM = 50  # newest matching messages read per term
MIN_MATCHED_TERMS = 2
MIN_SCORE = 0.5


@dataclass(frozen=True)
class Match:
    session_id: str
    score: float  # share of the content's terms the session's messages matched
    matched_terms: tuple[str, ...]  # in the content's term order
    turn_id: str  # the newest turn whose messages matched
    hits: int  # matching messages read


def query_terms(content: str) -> list[str]:
    """The content's `MAX_TERMS` longest search terms; equal lengths keep their order."""
    terms = search_terms(content)
    return sorted(terms, key=len, reverse=True)[:MAX_TERMS]


def rank(terms: Sequence[str], hits: Sequence[SearchHit]) -> list[Match]:
    """Every session with a hit, best first."""
    if not terms:
        return []
    found: dict[str, tuple[set[str], int, str]] = {}
    for hit in hits:
        matched, count, newest = found.get(hit.session_id, (set(), 0, ""))
        matched.add(hit.term)
        found[hit.session_id] = (matched, count + 1, max(newest, hit.turn_id))
    matches = [
        Match(
            session_id=session_id,
            score=round(len(matched) / len(terms), 3),
            matched_terms=tuple(term for term in terms if term in matched),
            turn_id=newest,
            hits=count,
        )
        for session_id, (matched, count, newest) in found.items()
    ]
    # Turn ids are ULIDs: a later one sorts higher, so "newest" compares as text.
    matches.sort(key=lambda m: (m.score, m.hits, m.turn_id, m.session_id), reverse=True)
    return matches


def best(terms: Sequence[str], hits: Sequence[SearchHit]) -> Match | None:
    """The best match if it is good enough (see the module's docstring), else None."""
    for match in rank(terms, hits)[:1]:
        enough = min(MIN_MATCHED_TERMS, len(terms))
        if len(match.matched_terms) >= enough or match.score >= MIN_SCORE:
            return match
    return None
