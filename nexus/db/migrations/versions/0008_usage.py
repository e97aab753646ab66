"""Turns keep what they cost; /metrics counts tokens and cost by model and persona.

`turns.cost_micros` is the turn's cost in micro-dollars as priced when it committed (None:
its model had no price) and `turns.price_version` the price table that priced it, so a
later price change never rewrites history. Turns committed before this revision are priced
here, with a copy of the price table as it stood (`BACKFILL_VERSION`, frozen in this file:
the code's table may change, a migration may not); a model it does not know stays
unpriced. `ix_turns_started_at` serves usage since a date.

A trigger on `turns` adds the turn's tokens (by kind), its cost and whether it was unpriced
to the counts of migration 0006 (`metric_deltas`), labelled by model and persona, so a
/metrics scrape reads them without scanning the ledger. A turn's usage is written once, with
the row, so only inserts (and deletes) move these counts.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = "family, a, b, c, n, ms"
BACKFILL_VERSION = "anthropic-2025-11+backfill"
# nexus/pricing.py's table when this revision was written, in units of 1/10,000 of
# a micro-dollar per token (USD per million tokens x 10,000), so the sums are exact integer
# arithmetic on both databases: input, output, cache read, cache write.
_PRICES = {
    "claude-opus-4": (50_000, 250_000, 5_000, 62_500),
    "claude-opus-4-0": (150_000, 750_000, 15_000, 187_500),
    "claude-opus-4-1": (150_000, 750_000, 15_000, 187_500),
    "claude-opus-4-2025": (150_000, 750_000, 15_000, 187_500),
    "claude-sonnet-4": (30_000, 150_000, 3_000, 37_500),
    "claude-haiku-4": (10_000, 50_000, 1_000, 12_500),
    "claude-3-7-sonnet": (30_000, 150_000, 3_000, 37_500),
    "claude-3-5-sonnet": (30_000, 150_000, 3_000, 37_500),
    "claude-3-5-haiku": (8_000, 40_000, 800, 10_000),
    "claude-3-opus": (150_000, 750_000, 15_000, 187_500),
    "claude-3-haiku": (2_500, 12_500, 250, 3_125),
    "scripted": (0, 0, 0, 0),
}
_KINDS = (
    ("input", "prompt_tokens"),
    ("output", "completion_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
)
# Labels fit metric_deltas' 64 characters (a longer value would fail the turn's insert).
_MODEL = "COALESCE(substr({r}.model, 1, 64), '')"
_PERSONA = (
    "COALESCE((SELECT substr(a.name, 1, 64) FROM sessions s JOIN agents a "
    "ON a.id = s.persona_id WHERE s.id = {r}.session_id), '')"
)


def _rows(r: str, sign: int) -> str:
    """A SELECT of the delta rows turn `r` contributes, with `sign` +1 or -1."""
    model, persona = _MODEL.format(r=r), _PERSONA.format(r=r)
    tokens = [
        f"SELECT 'tokens', {model}, {persona}, '{kind}', {sign} * {r}.{column}, 0 "
        f"WHERE {r}.{column} > 0"
        for kind, column in _KINDS
    ]
    cost = (
        f"SELECT 'cost', {model}, {persona}, '', {sign} * {r}.cost_micros, 0 "
        f"WHERE {r}.cost_micros > 0"
    )
    unpriced = (
        f"SELECT 'unpriced', {model}, {persona}, '', {sign}, 0 "
        f"WHERE {r}.cost_micros IS NULL AND {r}.total_tokens > 0"
    )
    return " UNION ALL ".join([*tokens, cost, unpriced])


def _create(bind: sa.Connection) -> None:
    insert = f"INSERT INTO metric_deltas ({_COLUMNS})"
    if bind.dialect.name == "postgresql":
        statements = [
            f"""CREATE FUNCTION nexus_usage_turns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN {insert} {_rows("NEW", 1)};
  ELSE {insert} {_rows("OLD", -1)}; END IF;
  RETURN NULL;
END $$""",
            "CREATE TRIGGER nexus_usage_turns AFTER INSERT OR DELETE ON turns "
            "FOR EACH ROW EXECUTE FUNCTION nexus_usage_turns()",
        ]
    else:
        statements = [
            "CREATE TRIGGER nexus_usage_turns_insert AFTER INSERT ON turns "
            f"BEGIN {insert} {_rows('NEW', 1)}; END",
            "CREATE TRIGGER nexus_usage_turns_delete AFTER DELETE ON turns "
            f"BEGIN {insert} {_rows('OLD', -1)}; END",
        ]
    for statement in statements:
        bind.execute(sa.text(statement))


def _seed(bind: sa.Connection) -> None:
    """The ledger's turns as they stand (priced by `_backfill`), as deltas grouped by model
    and persona."""
    model = "COALESCE(substr(t.model, 1, 64), '')"
    persona = "COALESCE(substr(a.name, 1, 64), '')"
    source = (
        "FROM turns t JOIN sessions s ON s.id = t.session_id JOIN agents a ON a.id = s.persona_id"
    )
    for kind, column in _KINDS:
        bind.execute(
            sa.text(
                f"INSERT INTO metric_deltas ({_COLUMNS}) "  # every piece is a constant of this file
                f"SELECT 'tokens', {model}, {persona}, '{kind}', SUM(t.{column}), 0 {source} "
                f"WHERE t.{column} > 0 GROUP BY {model}, {persona}"
            )
        )
    for family, value, counted in (
        ("cost", "SUM(t.cost_micros)", "t.cost_micros > 0"),
        ("unpriced", "COUNT(*)", "t.cost_micros IS NULL AND t.total_tokens > 0"),
    ):
        bind.execute(
            sa.text(
                f"INSERT INTO metric_deltas ({_COLUMNS}) "
                f"SELECT '{family}', {model}, {persona}, '', {value}, 0 {source} "
                f"WHERE {counted} GROUP BY {model}, {persona}"
            )
        )


def _backfill(bind: sa.Connection) -> None:
    """Price the turns already in the ledger, one UPDATE per model that has a price: each
    turn's sum rounded half-up to a whole micro-dollar, as the code prices a turn."""
    found = bind.execute(
        sa.text("SELECT DISTINCT model FROM turns WHERE model IS NOT NULL AND total_tokens > 0")
    ).scalars()
    cost = " + ".join(
        f"CAST(COALESCE({column}, 0) AS BIGINT) * CAST(:{column} AS BIGINT)" for _, column in _KINDS
    )
    for model in found:
        matches = [prefix for prefix in _PRICES if model.startswith(prefix)]
        if not matches:
            continue  # unpriced: no price to give it
        prices = dict(
            zip([column for _, column in _KINDS], _PRICES[max(matches, key=len)], strict=True)
        )
        bind.execute(
            sa.text(
                f"UPDATE turns SET cost_micros = ({cost} + 5000) / 10000, "  # noqa: S608 (constants)
                "price_version = :version WHERE model = :model AND total_tokens > 0"
            ),
            {**prices, "version": BACKFILL_VERSION, "model": model},
        )


def upgrade() -> None:
    op.add_column("turns", sa.Column("cost_micros", sa.BigInteger(), nullable=True))
    op.add_column("turns", sa.Column("price_version", sa.String(length=64), nullable=True))
    op.create_index("ix_turns_started_at", "turns", ["started_at"], unique=False)
    bind = op.get_bind()
    _backfill(bind)
    _seed(bind)
    _create(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP TRIGGER IF EXISTS nexus_usage_turns ON turns")
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS nexus_usage_turns()")
    else:
        for suffix in ("insert", "delete"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS nexus_usage_turns_{suffix}")
    bind.execute(
        sa.text("DELETE FROM metric_deltas WHERE family IN ('tokens', 'cost', 'unpriced')")
    )
    bind.execute(
        sa.text("DELETE FROM metric_totals WHERE family IN ('tokens', 'cost', 'unpriced')")
    )
    op.drop_index("ix_turns_started_at", table_name="turns")
    # Plain ALTER TABLE on SQLite too (no batch rebuild), so 0006's triggers on turns stay.
    op.drop_column("turns", "price_version")
    op.drop_column("turns", "cost_micros")
