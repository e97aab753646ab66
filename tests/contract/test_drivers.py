"""Postgres through either driver: the URL names the one that serves the ledger."""

from __future__ import annotations

import pytest

from nexus.db import Database
from tests.support import build_chain, new_session

# Each backend's DB-API package, by the `database` fixture's id.
DBAPI_PACKAGE = {"sqlite": "sqlite3", "postgres": "psycopg", "postgres-psycopg2": "psycopg2"}


def test_the_ledger_runs_on_the_driver_its_url_names(
    database: Database, request: pytest.FixtureRequest
) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 3)
        dbapi = uow.connection.connection.dbapi_connection
        uow.commit()
    backend = request.node.callspec.params["database"]
    assert type(dbapi).__module__.split(".")[0] == DBAPI_PACKAGE[backend]
    with database.unit_of_work() as uow:
        assert [view.turn.id for view in uow.ledger.threads.read_ancestry(chain[-1])] == chain
