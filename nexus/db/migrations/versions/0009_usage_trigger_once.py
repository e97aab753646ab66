"""The usage trigger on Postgres looks the turn's persona up once, not once per metric row.

0008's trigger function selects up to six delta rows (tokens by kind, cost, unpriced), and
each evaluated the persona subquery and the model label again. This one reads them once
into variables and inserts the rows from one VALUES list: the same rows, in every turn
commit's transaction, for less of its time. SQLite's triggers (in-process, where a lookup
costs no round trip) stay as 0008 made them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONCE = """CREATE OR REPLACE FUNCTION nexus_usage_turns() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r turns;  -- the row type of the table
  sign integer;
  model text;
  persona text;
BEGIN
  IF TG_OP = 'INSERT' THEN r := NEW; sign := 1; ELSE r := OLD; sign := -1; END IF;
  model := COALESCE(substr(r.model, 1, 64), '');
  SELECT substr(a.name, 1, 64) INTO persona
    FROM sessions s JOIN agents a ON a.id = s.persona_id WHERE s.id = r.session_id;
  INSERT INTO metric_deltas (family, a, b, c, n, ms)
  SELECT v.family, model, COALESCE(persona, ''), v.kind, sign * v.n, 0
  FROM (VALUES
    ('tokens', 'input', r.prompt_tokens::bigint),
    ('tokens', 'output', r.completion_tokens::bigint),
    ('tokens', 'cache_read', r.cache_read_tokens::bigint),
    ('tokens', 'cache_write', r.cache_write_tokens::bigint),
    ('cost', '', r.cost_micros),
    ('unpriced', '', CASE WHEN r.cost_micros IS NULL AND r.total_tokens > 0 THEN 1 ELSE 0 END)
  ) AS v(family, kind, n)
  WHERE v.n > 0;
  RETURN NULL;
END $$"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(_ONCE)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    # 0008's own definition, from its file: a migration's text never changes once released.
    usage = importlib.import_module("nexus.db.migrations.versions.0008_usage")
    insert = f"INSERT INTO metric_deltas ({usage._COLUMNS})"
    bind.exec_driver_sql(
        f"""CREATE OR REPLACE FUNCTION nexus_usage_turns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN {insert} {usage._rows("NEW", 1)};
  ELSE {insert} {usage._rows("OLD", -1)}; END IF;
  RETURN NULL;
END $$"""
    )
