"""Smart routing's scoring: term overlap per session over the newest matching messages."""

from __future__ import annotations

from nexus.arrival.smart import MAX_TERMS, best, query_terms, rank
from nexus.ledger.search_terms import SearchHit


def test_terms_are_the_longest_words_worth_matching_capped() -> None:
    assert query_terms("Can you check the invoice for ACME?") == ["invoice", "check", "acme"]
    many = " ".join(f"word{'x' * n}" for n in range(20))
    assert len(query_terms(many)) == MAX_TERMS
    assert query_terms("the a of") == []


def test_sessions_rank_by_the_share_of_terms_they_matched_then_hits_then_recency() -> None:
    terms = ["invoice", "acme", "friday"]
    hits = [
        SearchHit("invoice", "billing", "t03"),
        SearchHit("acme", "billing", "t03"),
        SearchHit("invoice", "billing", "t01"),
        SearchHit("friday", "weather", "t09"),
        SearchHit("invoice", "old", "t02"),
        SearchHit("acme", "old", "t02"),
    ]
    ranked = rank(terms, hits)
    assert [m.session_id for m in ranked] == ["billing", "old", "weather"]
    top = ranked[0]
    assert (top.score, top.matched_terms, top.turn_id, top.hits) == (
        round(2 / 3, 3),
        ("invoice", "acme"),
        "t03",
        3,
    )
    # Same share and hits: the one that matched more recently (a later ULID) wins.
    tied = rank(["acme"], [SearchHit("acme", "a", "t01"), SearchHit("acme", "b", "t05")])
    assert [m.session_id for m in tied] == ["b", "a"]


def test_a_match_needs_two_terms_or_half_of_them() -> None:
    assert best(["forecast", "check"], [SearchHit("forecast", "weather", "t1")]) is not None
    five = ["check", "invoice", "status", "acme", "tomorrow"]
    assert best(five, [SearchHit("tomorrow", "weather", "t1")]) is None
    two_of_five = [SearchHit("invoice", "billing", "t1"), SearchHit("acme", "billing", "t1")]
    found = best(five, two_of_five)
    assert found is not None and found.session_id == "billing"
    assert best(five, []) is None and best([], []) is None
