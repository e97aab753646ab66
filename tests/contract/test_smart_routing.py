"""Smart routing on both databases: the full-text index finds the session that discussed the
content, by how many of its terms it matched; reads are bounded; a miss falls back."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from nexus.adapters.scripted import Say
from nexus.arrival.route import RouteTarget, route
from nexus.arrival.smart import PER_TERM
from nexus.db import Database
from nexus.ledger.repository import NotFound
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock


def _talk(rig: Rig, label: str, said: str, answer: str) -> str:
    session = rig.session(label)
    rig.model.push(Say(answer))
    return rig.say(session.id, said).turn_id


def test_content_alone_goes_to_the_session_that_discussed_it_and_says_why(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    billing = _talk(rig, "dm:ent_billing", "did the ACME invoice go out?", "Sent yesterday.")
    _talk(rig, "dm:ent_weather", "what's the forecast for Friday?", "Sunny.")
    with database.unit_of_work() as uow:
        routed = route(uow.ledger, None, text="Please resend the invoice to ACME")
        assert routed.session.label == "dm:ent_billing" and routed.how == "smart"
        assert routed.matched_terms == ("invoice", "acme")
        assert routed.matched_turn_id == billing
        assert routed.score == round(2 / 3, 3)  # invoice and acme of invoice, resend, acme
        with pytest.raises(NotFound, match="nothing said so far matches"):
            route(uow.ledger, None, text="quantum chromodynamics")
        # With a target to fall back to, a miss goes there.
        fallback = route(
            uow.ledger,
            RouteTarget("session", "dm:ent_weather", smart=True),
            text="quantum chromodynamics",
        )
        assert (fallback.session.label, fallback.how, fallback.matched_terms) == (
            "dm:ent_weather",
            "label",
            (),
        )


def test_reads_are_bounded_per_term_and_the_newest_matches_count(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    old = rig.session("dm:ent_old")
    for n in range(PER_TERM + 10):
        rig.model.push(Say(f"noted {n}"))
        rig.say(old.id, f"pelican report {n}")
    with database.unit_of_work() as uow:
        hits = uow.ledger.search.recent_hits(["pelican", "report"], per_term=PER_TERM)
    assert len(hits) == 2 * PER_TERM  # not every one of the 60 matching messages
    assert {hit.session_id for hit in hits} == {old.id}
    newest = max(hit.turn_id for hit in hits)
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(old.id)
    assert head is not None and newest == head.thread_id


def test_archived_and_worker_sessions_are_never_chosen(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    _talk(rig, "dm:ent_gone", "the pelican budget", "noted")
    _talk(rig, "worker:01", "the pelican budget, itemised", "noted")
    with database.engine.begin() as connection:
        connection.execute(
            text("UPDATE sessions SET status = 'archived' WHERE label = 'dm:ent_gone'")
        )
        connection.execute(text("UPDATE sessions SET is_subagent = true WHERE label = 'worker:01'"))
    with database.unit_of_work() as uow, pytest.raises(NotFound):
        route(uow.ledger, None, text="pelican budget")
