"""The statement check of SQL for hooks: one read-only query, however it is dressed."""

from __future__ import annotations

import pytest

from nexus.db.sql_guard import SqlRefused, read_only_statement


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("SELECT 1", "SELECT 1"),
        ("  select 1 ;; ", "  select 1"),
        ("SELECT 1; -- done", "SELECT 1"),
        ("(SELECT 1) UNION (SELECT 2)", "(SELECT 1) UNION (SELECT 2)"),
        ("WITH a AS (SELECT 1) SELECT * FROM a", "WITH a AS (SELECT 1) SELECT * FROM a"),
        ("VALUES (1)", "VALUES (1)"),
        ("TABLE events", "TABLE events"),
        ("-- a note\nSELECT ';'", "-- a note\nSELECT ';'"),
        ("/* a; b */ SELECT 'it''s; fine'", "/* a; b */ SELECT 'it''s; fine'"),
        ('SELECT "odd;name" FROM t', 'SELECT "odd;name" FROM t'),
        ("SELECT $$a;b$$, $x$c;$y$;d$x$", "SELECT $$a;b$$, $x$c;$y$;d$x$"),
        ("SELECT E'\\'; x'", "SELECT E'\\'; x'"),
        ("/* outer /* inner; */ still; */ SELECT 1", "/* outer /* inner; */ still; */ SELECT 1"),
        ("SELECT a$1 FROM t", "SELECT a$1 FROM t"),
    ],
)
def test_one_query_passes_without_its_trailing_semicolons(query: str, kept: str) -> None:
    assert read_only_statement(query) == kept


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("INSERT INTO t VALUES (1)", "read-only: INSERT is not allowed"),
        ("update t set a = 1", "read-only: UPDATE is not allowed"),
        ("DELETE FROM t", "read-only: DELETE"),
        ("CREATE TABLE t (a int)", "read-only: CREATE"),
        ("/* SELECT */ DROP TABLE t", "read-only: DROP"),
        ("COPY t TO PROGRAM 'x'", "read-only: COPY"),
        ("SET ROLE postgres", "read-only: SET"),
        ("EXPLAIN ANALYZE DELETE FROM t", "read-only: EXPLAIN"),
        ("SELECT 1; DELETE FROM t", "one statement at a time"),
        ("SELECT 1; COMMIT; INSERT INTO t VALUES (1)", "one statement at a time"),
        # What a lexer that missed E'' escapes would read as one string.
        ("SELECT E'\\''; DELETE FROM t; --'", "one statement at a time"),
        ("SELECT 'open", "not closed"),
        ("SELECT 1 /* open", "not closed"),
        ("SELECT $q$ open", "not closed"),
        ("", "needs a query"),
        ("  ;  ", "needs a query"),
        ("-- only a comment", "needs a query"),
    ],
)
def test_anything_else_is_refused_saying_why(query: str, why: str) -> None:
    with pytest.raises(SqlRefused, match=why.replace("(", r"\(")):
        read_only_statement(query)
