"""Sessions: create, resolve through aliases, claim epochs, history (SQLite and Postgres)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nexus.db import Database
from nexus.ledger.enums import SessionOrigin
from nexus.ledger.records import NewSession
from nexus.ledger.repository import LabelTaken, NotFound
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
