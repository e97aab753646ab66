"""Counts for /metrics kept as rows change, so a scrape no longer scans the ledger.

/metrics used to count events, queue items, turns and deliveries with a GROUP BY over each
whole table on every scrape: a cost that grew with the ledger forever. Now a trigger on
each of those tables writes a small delta row (-1 for the row's old labels, +1 for its new
ones) in the same transaction as the change, and a scrape folds the deltas written since
the last one into `metric_totals`. Deltas are only ever inserted, so writers never wait on
one another; the scrape alone deletes them. The totals start from the ledger as it stands.

SQLite drops a table's triggers when a batch migration rebuilds the table: a migration that
rebuilds events, queue_items, turns or deliveries must create them again (`_create`).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = "family, a, b, c, n, ms"


class _Family(NamedTuple):
    """One count: its labels and milliseconds as SQL over a row named `{r}`, and which
    rows it counts. (A NamedTuple: Alembic loads this file outside sys.modules, where a
    dataclass cannot resolve its annotations.)"""

    name: str
    labels: tuple[str, str, str]
    ms: str = "0"
    counts: str = "1 = 1"


_REASON = (
    "CASE WHEN {r}.status <> 'failed' THEN '' "
    "WHEN {r}.error LIKE 'not sent: chunk %' THEN 'abandoned' "
    "WHEN {r}.error LIKE 'gave up after %' THEN 'gave_up' "
    "WHEN {r}.error LIKE 'outcome unknown%' THEN 'unknown' "
    "ELSE 'refused' END"
)
# table -> (the columns whose change moves a count, the families it feeds)
_TABLES: dict[str, tuple[tuple[str, ...], tuple[_Family, ...]]] = {
    "events": (
        ("direction", "adapter", "disposition"),
        (
            _Family(
                "events", ("{r}.direction", "{r}.adapter", "COALESCE({r}.disposition, 'pending')")
            ),
        ),
    ),
    "queue_items": (
        ("mode", "status", "disposition"),
        (_Family("queue_items", ("{r}.mode", "{r}.status", "COALESCE({r}.disposition, '')")),),
    ),
    "turns": (
        ("status", "started_at", "completed_at"),
        (
            _Family("turns", ("{r}.status", "''", "''")),
            _Family(
                "turn_latency",
                ("''", "''", "''"),
                ms="{r}.completed_at - {r}.started_at",
                counts="{r}.completed_at IS NOT NULL",
            ),
        ),
    ),
    "deliveries": (
        ("platform", "status", "error"),
        (_Family("deliveries", ("{r}.platform", "{r}.status", _REASON)),),
    ),
}


def _rows(families: tuple[_Family, ...], r: str, sign: int) -> str:
    """A SELECT of the delta rows row `r` contributes, with `sign` +1 or -1."""
    return " UNION ALL ".join(
        f"SELECT '{f.name}', {', '.join(label.format(r=r) for label in f.labels)}, "
        f"{sign}, {sign} * ({f.ms.format(r=r)}) WHERE {f.counts.format(r=r)}"
        for f in families
    )


def _changed(columns: tuple[str, ...], distinct: str) -> str:
    return " OR ".join(f"OLD.{column} {distinct} NEW.{column}" for column in columns)


def _postgres(table: str, columns: tuple[str, ...], families: tuple[_Family, ...]) -> list[str]:
    insert = f"INSERT INTO metric_deltas ({_COLUMNS})"
    return [
        f"""CREATE FUNCTION nexus_count_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN {insert} {_rows(families, "OLD", -1)}; END IF;
  IF TG_OP <> 'DELETE' THEN {insert} {_rows(families, "NEW", 1)}; END IF;
  RETURN NULL;
END $$""",
        f"CREATE TRIGGER nexus_count_{table} AFTER INSERT OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION nexus_count_{table}()",
        f"CREATE TRIGGER nexus_count_{table}_update AFTER UPDATE OF {', '.join(columns)} "
        f"ON {table} FOR EACH ROW WHEN ({_changed(columns, 'IS DISTINCT FROM')}) "
        f"EXECUTE FUNCTION nexus_count_{table}()",
    ]


def _sqlite(table: str, columns: tuple[str, ...], families: tuple[_Family, ...]) -> list[str]:
    insert = f"INSERT INTO metric_deltas ({_COLUMNS})"
    return [
        f"CREATE TRIGGER nexus_count_{table}_insert AFTER INSERT ON {table} "
        f"BEGIN {insert} {_rows(families, 'NEW', 1)}; END",
        f"CREATE TRIGGER nexus_count_{table}_update AFTER UPDATE OF {', '.join(columns)} "
        f"ON {table} WHEN {_changed(columns, 'IS NOT')} "
        f"BEGIN {insert} {_rows(families, 'OLD', -1)}; {insert} {_rows(families, 'NEW', 1)}; END",
        f"CREATE TRIGGER nexus_count_{table}_delete AFTER DELETE ON {table} "
        f"BEGIN {insert} {_rows(families, 'OLD', -1)}; END",
    ]


def _seed(table: str, family: _Family) -> str:
    """The ledger as it stands, as deltas grouped by labels (and by latency, which the first
    scrape sorts into buckets)."""
    labels = [label.format(r="r") for label in family.labels]
    ms = family.ms.format(r="r")
    # Postgres refuses constants in GROUP BY (and reads a number there as a position).
    keys = [key for key in (*labels, ms) if key not in ("''", "0")]
    grouped = f" GROUP BY {', '.join(keys)}" if keys else ""
    # Every piece is a constant of this file.
    return (
        f"INSERT INTO metric_deltas ({_COLUMNS}) "  # noqa: S608
        f"SELECT '{family.name}', {', '.join(labels)}, COUNT(*), COALESCE(SUM({ms}), 0) "
        f"FROM {table} r WHERE {family.counts.format(r='r')}{grouped}"
    )


def _create(bind: sa.Connection, table: str) -> None:
    columns, families = _TABLES[table]
    make = _postgres if bind.dialect.name == "postgresql" else _sqlite
    for statement in make(table, columns, families):
        bind.execute(sa.text(statement))  # text(): the driver sees LIKE's % escaped


def upgrade() -> None:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "metric_deltas",
        sa.Column("id", big_id, autoincrement=True, nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("a", sa.String(length=64), nullable=False),
        sa.Column("b", sa.String(length=64), nullable=False),
        sa.Column("c", sa.String(length=64), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_deltas")),
    )
    op.create_table(
        "metric_totals",
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("a", sa.String(length=64), nullable=False),
        sa.Column("b", sa.String(length=64), nullable=False),
        sa.Column("c", sa.String(length=64), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("family", "a", "b", "c", name=op.f("pk_metric_totals")),
    )
    bind = op.get_bind()
    for table, (_, families) in _TABLES.items():
        for family in families:
            bind.execute(sa.text(_seed(table, family)))
        _create(bind, table)


def downgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        if bind.dialect.name == "postgresql":
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS nexus_count_{table} ON {table}")
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS nexus_count_{table}_update ON {table}")
            bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS nexus_count_{table}()")
        else:
            for suffix in ("insert", "update", "delete"):
                bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS nexus_count_{table}_{suffix}")
    op.drop_table("metric_totals")
    op.drop_table("metric_deltas")
