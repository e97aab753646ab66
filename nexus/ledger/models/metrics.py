"""The pipeline's counts for /metrics, kept by the database itself as rows change."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.models.base import Base


class MetricDelta(Base):
    """One change to one count, written by a trigger in the transaction that changed the
    row (migration 0006). A scrape folds these into `metric_totals` and deletes them, so it
    reads what changed since the last scrape, never the ledger itself."""

    __tablename__ = "metric_deltas"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    family: Mapped[str] = mapped_column(String(32))
    a: Mapped[str] = mapped_column(String(64))  # the family's labels, in its order
    b: Mapped[str] = mapped_column(String(64))
    c: Mapped[str] = mapped_column(String(64))
    n: Mapped[int] = mapped_column(BigInteger)  # rows gained (+) or lost (-)
    ms: Mapped[int] = mapped_column(BigInteger)  # their milliseconds (turn latency), signed


class MetricTotal(Base):
    """A count as of the last fold: one row per family and label values."""

    __tablename__ = "metric_totals"

    family: Mapped[str] = mapped_column(String(32), primary_key=True)
    a: Mapped[str] = mapped_column(String(64), primary_key=True)
    b: Mapped[str] = mapped_column(String(64), primary_key=True)
    c: Mapped[str] = mapped_column(String(64), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)
    ms: Mapped[int] = mapped_column(BigInteger)
