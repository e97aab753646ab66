"""Sessions: create, resolve through aliases, claim epochs, history (SQLite and Postgres)."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from nexus.db import Database
from nexus.ledger.enums import SessionOrigin
from nexus.ledger.records import NewSession
from nexus.ledger.repository import LabelTaken, LedgerConflict, NotFound
from tests.support import new_session


def test_create_then_resolve_by_label(database: Database) -> None:
    with database.unit_of_work() as uow:
        created = new_session(uow.ledger, "dm:ent_001")
        uow.commit()
    with database.unit_of_work() as uow:
        found = uow.ledger.sessions.resolve("dm:ent_001")
    assert found == created
    assert found.thread_id is None
    assert found.epoch == 0
    assert found.origin == SessionOrigin.USER


def test_duplicate_label_is_refused_and_changes_nothing(database: Database) -> None:
    with database.unit_of_work() as uow:
        first = new_session(uow.ledger, "main")
        with pytest.raises(LabelTaken, match="main"):
            new_session(uow.ledger, "main")
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("main") == first


def test_alias_resolves_to_its_session(database: Database) -> None:
    with database.unit_of_work() as uow:
        primary = new_session(uow.ledger, "dm:ent_001")
        assert uow.ledger.sessions.add_alias("dm:ent_002", "dm:ent_001", reason="identity_merge")
        # The same alias twice is a no-op, not an error.
        assert not uow.ledger.sessions.add_alias("dm:ent_002", "dm:ent_001", reason="manual")
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("dm:ent_002") == primary
        assert uow.ledger.sessions.get_by_label("dm:ent_002") is None
        assert uow.ledger.sessions.resolve("dm:ent_404") is None


def test_alias_label_cannot_be_created_as_a_session(database: Database) -> None:
    with database.unit_of_work() as uow:
        new_session(uow.ledger, "dm:ent_001")
        uow.ledger.sessions.add_alias("dm:ent_002", "dm:ent_001", reason="identity_merge")
        with pytest.raises(LabelTaken, match="alias"):
            new_session(uow.ledger, "dm:ent_002")


def test_alias_to_a_missing_session_is_refused(database: Database) -> None:
    with database.unit_of_work() as uow, pytest.raises(NotFound):
        uow.ledger.sessions.add_alias("dm:x", "dm:nobody", reason="manual")


def test_aliases_resolve_first_and_through_each_other(database: Database) -> None:
    with database.unit_of_work() as uow:
        for label in ("dm:a", "dm:b", "dm:c"):
            new_session(uow.ledger, label)
        agent = uow.ledger.agents.ensure("atlas")
        uow.ledger.sessions.add_alias("dm:a", "dm:b", reason="identity_merge")
        uow.ledger.sessions.add_alias("dm:b", "dm:c", reason="identity_merge")
        uow.commit()
    with database.unit_of_work() as uow:
        c = uow.ledger.sessions.get_by_label("dm:c")
        # dm:a and dm:b keep their sessions (their history), but what is addressed to them
        # goes where their aliases lead; ensure (the router's lookup) does the same.
        assert uow.ledger.sessions.resolve("dm:a") == uow.ledger.sessions.resolve("dm:b") == c
        routed = uow.ledger.sessions.ensure(NewSession(label="dm:a", persona_id=agent.id))
        assert routed == c
        assert uow.ledger.sessions.get_by_label("dm:a") is not None


def test_an_alias_that_would_close_a_circle_is_refused(database: Database) -> None:
    with database.unit_of_work() as uow:
        for label in ("dm:a", "dm:b", "dm:c"):
            new_session(uow.ledger, label)
        uow.ledger.sessions.add_alias("dm:a", "dm:b", reason="identity_merge")
        uow.ledger.sessions.add_alias("dm:b", "dm:c", reason="identity_merge")
        with pytest.raises(LedgerConflict, match="circle"):
            uow.ledger.sessions.add_alias("dm:c", "dm:a", reason="manual")
        with pytest.raises(LedgerConflict, match="circle"):
            uow.ledger.sessions.add_alias("dm:c", "dm:c", reason="manual")
        with pytest.raises(LedgerConflict, match="circle"):
            uow.ledger.sessions.repoint_alias("dm:b", "dm:a", reason="manual")
        assert uow.ledger.sessions.repoint_alias("dm:a", "dm:c", reason="identity_merge")
        assert not uow.ledger.sessions.repoint_alias("dm:a", "dm:c", reason="identity_merge")
        uow.commit()
    with database.unit_of_work() as uow:
        c = uow.ledger.sessions.get_by_label("dm:c")
        assert [uow.ledger.sessions.resolve(k) for k in ("dm:a", "dm:b", "dm:c")] == [c, c, c]


def test_two_aliases_written_at_once_cannot_close_a_circle(pg_database: Database) -> None:
    with pg_database.unit_of_work() as uow:
        new_session(uow.ledger, "dm:a")
        new_session(uow.ledger, "dm:b")
        uow.commit()
    outcomes: dict[str, str] = {}
    first_written = threading.Event()

    def write(alias: str, target: str, hold_s: float) -> None:
        try:
            with pg_database.unit_of_work() as uow:
                uow.ledger.sessions.add_alias(alias, target, reason="manual")
                first_written.set()
                time.sleep(hold_s)  # still uncommitted while the other one checks
                uow.commit()
            outcomes[alias] = "written"
        except LedgerConflict:
            outcomes[alias] = "refused"

    first = threading.Thread(target=write, args=("dm:a", "dm:b", 0.5))
    first.start()
    assert first_written.wait(5)
    second = threading.Thread(target=write, args=("dm:b", "dm:a", 0.0))
    second.start()
    first.join(10)
    second.join(10)
    assert outcomes == {"dm:a": "written", "dm:b": "refused"}
    with pg_database.unit_of_work() as uow:
        b = uow.ledger.sessions.get_by_label("dm:b")
        assert uow.ledger.sessions.resolve("dm:a") == uow.ledger.sessions.resolve("dm:b") == b


def test_ensure_follows_aliases_and_creates_once(database: Database) -> None:
    with database.unit_of_work() as uow:
        agent = uow.ledger.agents.ensure("atlas")
        first = uow.ledger.sessions.ensure(NewSession(label="group:slack:eng", persona_id=agent.id))
        again = uow.ledger.sessions.ensure(NewSession(label="group:slack:eng", persona_id=agent.id))
        uow.ledger.sessions.add_alias("old-key", "group:slack:eng", reason="manual")
        via_alias = uow.ledger.sessions.ensure(NewSession(label="old-key", persona_id=agent.id))
    assert first == again == via_alias


def test_claim_increments_the_epoch(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epochs = [uow.ledger.sessions.claim(session.id) for _ in range(3)]
        uow.commit()
    assert epochs == [1, 2, 3]
    with database.unit_of_work() as uow:
        with pytest.raises(NotFound):
            uow.ledger.sessions.claim("no-such-session")
        current = uow.ledger.sessions.get(session.id)
    assert current is not None and current.epoch == 3


@pytest.mark.parametrize(
    "label", ["", "a\x00b", "line\nbreak", "x" * 513], ids=["empty", "nul", "newline", "too-long"]
)
def test_hostile_labels_are_refused_before_sql(label: str) -> None:
    with pytest.raises(ValidationError):
        NewSession(label=label, persona_id="p")


@pytest.mark.parametrize(
    "label", ['it\'s "quoted"', ":name", "%s %(x)s", "\u202eRTL", "emoji 🙂", "x" * 512]
)
def test_awkward_but_valid_labels_round_trip(database: Database, label: str) -> None:
    with database.unit_of_work() as uow:
        created = new_session(uow.ledger, label)
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve(label) == created


def test_uncommitted_unit_of_work_leaves_nothing(database: Database) -> None:
    with database.unit_of_work() as uow:
        new_session(uow.ledger, "ghost")
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("ghost") is None


def test_after_commit_callbacks_run_only_after_commit(database: Database) -> None:
    rung: list[str] = []
    with database.unit_of_work() as uow:
        uow.after_commit(lambda: rung.append("rolled back"))
    with database.unit_of_work() as uow:
        new_session(uow.ledger, "bell")

        def ring() -> None:
            # The row is visible to another connection by the time the callback runs.
            with database.unit_of_work() as other:
                assert other.ledger.sessions.resolve("bell") is not None
            rung.append("committed")

        uow.after_commit(ring)
        assert rung == []
        uow.commit()
    assert rung == ["committed"]
