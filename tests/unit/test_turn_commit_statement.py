"""The turn commit's one Postgres statement stays within what psycopg 3 caches: its text is
converted once per process, not re-parsed on every commit (a cost counted, not timed)."""

from __future__ import annotations

from psycopg import _queries
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

from nexus.ledger.repository.turn_commit_sql import COMMIT_IN_ONE_STATEMENT


def _compiled() -> tuple[str, int]:
    compiled = COMMIT_IN_ONE_STATEMENT.compile(dialect=pg_psycopg.dialect())  # type: ignore[no-untyped-call]
    return str(compiled), len(compiled.params)


def test_the_commit_statement_fits_psycopgs_conversion_cache() -> None:
    sql, params = _compiled()
    assert len(sql) <= _queries.MAX_CACHED_STATEMENT_LENGTH, len(sql)
    assert params <= _queries.MAX_CACHED_STATEMENT_PARAMS, params


def test_the_commit_statement_needs_no_per_execution_expansion() -> None:
    """No expanding IN list: SQLAlchemy would render the statement anew on every commit."""
    sql, _ = _compiled()
    assert "POSTCOMPILE" not in sql
