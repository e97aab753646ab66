"""Where a session may roll back to: a turn it made, on the chain behind its head."""

from __future__ import annotations

from nexus.ledger.enums import SessionOrigin, SessionStatus
from nexus.ledger.records import SessionRecord
from nexus.sessions.rollback import refusal


def _session(status: SessionStatus = SessionStatus.ACTIVE) -> SessionRecord:
    return SessionRecord(
        id="S",
        label="dm:ent_a",
        persona_id="P",
        thread_id="t3",
        epoch=4,
        origin=SessionOrigin.USER,
        status=status,
        created_at=0,
        updated_at=0,
    )


CHAIN = ["t1", "t2", "t3"]


def test_a_turn_of_its_own_chain_is_a_place_to_go_back_to() -> None:
    assert refusal(_session(), "t1", "S", CHAIN) is None
    assert refusal(_session(), "t2", "S", CHAIN) is None


def test_a_turn_of_another_session_is_refused_even_on_the_chain() -> None:
    """A fork's inherited turns are its parent's: not a place to roll the fork back to."""
    why = refusal(_session(), "t1", "PARENT", CHAIN)
    assert why is not None and "another session" in why


def test_a_turn_off_the_chain_is_refused() -> None:
    why = refusal(_session(), "t9", "S", CHAIN)
    assert why is not None and "not on the chain" in why


def test_a_deleted_session_does_not_roll_back() -> None:
    why = refusal(_session(SessionStatus.DELETED), "t1", "S", CHAIN)
    assert why is not None and "deleted" in why
