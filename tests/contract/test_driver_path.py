"""Statements handed straight to the driver (`repository/driver.py`) behave as through Core:
the same rows, the same errors, the same events, the same JSON."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import bindparam, exc, insert, select, text

from nexus.db import Database
from nexus.ledger.enums import EventStatus, MessageSource
from nexus.ledger.models import Agent, table_of
from nexus.ledger.records import DeliveryDraft, EventDraft
from nexus.ledger.repository import driver
from tests.support import build_chain, new_session, recorded_statements

agents = table_of(Agent)
_INSERT_AGENT = insert(agents)
_AGENT_BY_ID = select(agents.c.id.label("agent"), agents.c.default_model_config).where(
    agents.c.id == bindparam("agent_id")
)
_RENAME = agents.update().where(agents.c.id == bindparam("agent_id")).values(name="renamed")


def _agent(agent_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "name": f"agent {agent_id}",
        "system_prompt": "You help.",
        "created_at": 1,
        "updated_at": 1,
        **extra,
    }


def test_rows_come_back_by_label_and_every_statement_is_seen_by_the_engines_events(
    database: Database,
) -> None:
    with database.unit_of_work() as uow:
        with recorded_statements(database) as seen:
            driver.execute(uow.connection, _INSERT_AGENT, _agent("a1"))
            found = driver.rows(uow.connection, _AGENT_BY_ID, {"agent_id": "a1"})
            changed = driver.execute(uow.connection, _RENAME, {"agent_id": "a1"})
        uow.commit()
    assert [row["agent"] for row in found] == ["a1"]
    assert changed == 1
    assert [sql.split()[0] for sql in seen] == ["INSERT", "SELECT", "UPDATE"]
    with database.unit_of_work() as uow:
        assert driver.one_or_none(uow.connection, _AGENT_BY_ID, {"agent_id": "a1"}) is not None
        assert driver.one_or_none(uow.connection, _AGENT_BY_ID, {"agent_id": "none"}) is None


def test_an_insert_writes_the_columns_its_parameters_name_and_the_rest_take_their_defaults(
    database: Database,
) -> None:
    with database.unit_of_work() as uow:
        driver.execute(uow.connection, _INSERT_AGENT, _agent("short"))
        driver.execute(
            uow.connection,
            _INSERT_AGENT,
            _agent("full", default_model_config={"model": "m", "n": [1]}),
        )
        uow.commit()
    with database.unit_of_work() as uow:
        rows = {
            row.id: row.default_model_config
            for row in uow.connection.execute(select(agents.c.id, agents.c.default_model_config))
        }
    assert rows["full"] == {"model": "m", "n": [1]}
    # Left out: the column's default, computed in Python (`default=dict`) as Core does.
    assert rows["short"] == {}


def test_json_parameters_are_stored_as_core_stores_them(database: Database) -> None:
    """A dict, and None, in a JSON column: the same stored value as Core's binding."""
    with database.unit_of_work() as uow:
        driver.execute(
            uow.connection, _INSERT_AGENT, _agent("d", default_model_config={"k": "é\n"})
        )
        driver.execute(uow.connection, _INSERT_AGENT, _agent("n", default_model_config=None))
        uow.connection.execute(_INSERT_AGENT, _agent("core-n", default_model_config=None))
        uow.commit()
    as_text = (
        "default_model_config::text" if database.dialect == "postgresql" else "default_model_config"
    )
    with database.unit_of_work() as uow:
        stored: dict[str, Any] = dict(
            uow.connection.execute(text(f"SELECT id, {as_text} FROM agents")).all()
        )
        config = uow.connection.execute(
            select(agents.c.default_model_config).where(agents.c.id == "d")
        ).scalar_one()
    assert config == {"k": "é\n"}
    assert stored["n"] == stored["core-n"]


def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(database: Database) -> None:
    with database.unit_of_work() as uow:
        driver.execute(uow.connection, _INSERT_AGENT, _agent("dup"))
        with pytest.raises(exc.IntegrityError):
            driver.execute(uow.connection, _INSERT_AGENT, _agent("dup"))


def test_an_expanding_parameter_is_refused_before_anything_runs(pg_database: Database) -> None:
    in_list = select(agents.c.id).where(agents.c.id.in_(bindparam("ids", expanding=True)))
    with pg_database.unit_of_work() as uow, recorded_statements(pg_database) as seen:
        if uow.connection.dialect.driver != "psycopg":
            found = driver.rows(uow.connection, in_list, {"ids": ["a"]})  # Core expands it
            assert found == []
            return
        with pytest.raises(ValueError, match="expanding"):
            driver.rows(uow.connection, in_list, {"ids": ["a"]})
    assert seen == []


def test_a_lost_connection_is_dropped_from_the_pool(pg_database: Database) -> None:
    """As through Core: the statement fails as a disconnect, and the next unit of work gets
    a connection that works."""
    with pg_database.engine.connect() as other:
        with pg_database.unit_of_work() as uow:
            pid = uow.connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            uow.rollback()
            other.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
            other.commit()
            with pytest.raises(exc.DBAPIError) as raised:
                driver.rows(uow.connection, _AGENT_BY_ID, {"agent_id": "x"})
        assert raised.value.connection_invalidated
    with pg_database.unit_of_work() as uow:
        assert driver.rows(uow.connection, _AGENT_BY_ID, {"agent_id": "x"}) == []


def test_a_transactions_first_statement_opens_it_and_reports_its_row_count(
    database: Database,
) -> None:
    """Straight to the driver, the first statement opens the unit of work's transaction as
    through Core: a rollback undoes its write, the row count is its own, and an error in it
    is raised as anywhere else."""
    with database.unit_of_work() as uow:
        driver.execute(uow.connection, _INSERT_AGENT, _agent("kept"))
        uow.commit()
    with database.unit_of_work() as uow:
        assert driver.execute(uow.connection, _RENAME, {"agent_id": "kept"}) == 1
        assert driver.execute(uow.connection, _INSERT_AGENT, _agent("undone")) == 1
        uow.rollback()
    with database.unit_of_work() as uow:
        with pytest.raises(exc.IntegrityError):
            driver.execute(uow.connection, _INSERT_AGENT, _agent("kept"))
        uow.rollback()
    with database.unit_of_work() as uow:
        found = driver.rows(uow.connection, select(agents.c.id, agents.c.name), {})
    assert {(row["id"], row["name"]) for row in found} == {("kept", "agent kept")}


def _reply(turn_id: str) -> EventDraft:
    return EventDraft(
        id=f"reply:{turn_id}",
        adapter="telegram",
        platform="telegram",
        kind="reply",
        direction="outbound",
        source=MessageSource.AGENT,
        text="hello",
        occurred_at=1,
        payload={"turn": turn_id},
    )


def _chunk(session_id: str, turn_id: str, index: int) -> DeliveryDraft:
    return DeliveryDraft(
        turn_id=turn_id,
        chunk_index=index,
        session_id=session_id,
        event_id=f"reply:{turn_id}",
        platform="telegram",
        target={"chat_id": 1},
        text=f"chunk {index}",
    )


@pytest.mark.parametrize("chunks", [1, 3])
def test_a_reply_is_its_settled_event_and_its_chunks_once_however_often_recorded(
    database: Database, chunks: int
) -> None:
    """A one-chunk reply is written in one statement on Postgres (event and chunk), a
    longer one as its event and then its chunks; recording it again changes nothing."""
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        [turn_id] = build_chain(uow.ledger, session, 1)
        drafts = [_chunk(session.id, turn_id, n) for n in range(chunks)]
        with recorded_statements(database) as seen:
            ids = uow.ledger.deliveries.add_reply(
                _reply(turn_id), drafts, disposition="delivering", detail="d"
            )
        again = uow.ledger.deliveries.add_reply(
            _reply(turn_id), drafts, disposition="delivering", detail="d"
        )
        uow.commit()
    assert len(ids) == chunks and again == ids
    if database.dialect == "postgresql" and chunks == 1:
        assert len(seen) == 1
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(f"reply:{turn_id}")
        payload = uow.ledger.events.payload_of(f"reply:{turn_id}")
        stored = uow.ledger.deliveries.for_turn(turn_id)
    assert event is not None and event.status == EventStatus.PROCESSED
    assert event.disposition == "delivering" and payload == {"turn": turn_id}
    assert [d.id for d in stored] == ids
    assert [d.text for d in stored] == [f"chunk {n}" for n in range(chunks)]
