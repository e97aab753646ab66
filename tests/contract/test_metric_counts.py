"""The counts /metrics reads, kept by triggers as rows change, always equal a count of the
ledger itself — on both databases, across scrapes, and from a ledger that predates them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, text

from nexus.db import Database
from nexus.db.migrate import alembic_config, upgrade
from nexus.ledger.repository.metrics import LedgerFigures
from tests.contract.outbound_support import message, outbound_rig
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock, build_chain, new_session

BUCKETS = (0.5, 1.0, 2.5)
THREE_CHUNKS = "\n\n".join("Paragraph. " + "The ledger keeps every turn. " * 50 for _ in range(7))


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


def _counted(connection: Connection) -> LedgerFigures:
    """The figures by GROUP BY over the whole ledger: what the counts must equal."""

    def rows(sql: str) -> list[tuple[object, ...]]:
        return [tuple(row) for row in connection.execute(text(sql)).all()]

    latency = "completed_at - started_at"
    finished = rows(f"SELECT {latency} FROM turns WHERE completed_at IS NOT NULL")
    return LedgerFigures(
        events=sorted(rows(  # type: ignore[arg-type]
            "SELECT direction, adapter, COALESCE(disposition, 'pending'), COUNT(*) FROM events "
            "GROUP BY 1, 2, 3"
        )),
        queue_depth=sorted(rows(  # type: ignore[arg-type]
            "SELECT mode, status, COUNT(*) FROM queue_items "
            "WHERE status IN ('queued', 'claimed') GROUP BY 1, 2"
        )),
        dispositions=sorted(rows(  # type: ignore[arg-type]
            "SELECT disposition, COUNT(*) FROM queue_items WHERE disposition IS NOT NULL "
            "GROUP BY 1"
        )),
        turns=sorted(rows("SELECT status, COUNT(*) FROM turns GROUP BY 1")),  # type: ignore[arg-type]
        turn_latency=[
            (bound, sum(1 for (ms,) in finished if int(str(ms)) <= bound * 1000))
            for bound in BUCKETS
        ],
        turn_latency_sum_s=sum(int(str(ms)) for (ms,) in finished) / 1000,
        turn_latency_count=len(finished),
        deliveries=sorted(rows(  # type: ignore[arg-type]
            "SELECT platform, status, COUNT(*) FROM deliveries GROUP BY 1, 2"
        )),
        delivery_failures=sorted(rows(  # type: ignore[arg-type]
            "SELECT platform, CASE WHEN error LIKE 'not sent: chunk %' THEN 'abandoned' "
            "ELSE 'refused' END, COUNT(*) FROM deliveries WHERE status = 'failed' GROUP BY 1, 2"
        )),
    )  # fmt: skip


def _scraped(database: Database) -> LedgerFigures:
    with database.unit_of_work() as uow:
        figures = uow.ledger.metrics.figures(BUCKETS)
        uow.commit()
    # Zero counts are series that once had rows; the GROUP BY has no row for them.
    return LedgerFigures(
        events=sorted(row for row in figures.events if row[-1]),
        queue_depth=sorted(row for row in figures.queue_depth if row[-1]),
        dispositions=sorted(row for row in figures.dispositions if row[-1]),
        turns=sorted(row for row in figures.turns if row[-1]),
        turn_latency=figures.turn_latency,
        turn_latency_sum_s=figures.turn_latency_sum_s,
        turn_latency_count=figures.turn_latency_count,
        deliveries=sorted(row for row in figures.deliveries if row[-1]),
        delivery_failures=sorted(row for row in figures.delivery_failures if row[-1]),
    )


def _oracle(database: Database) -> LedgerFigures:
    with database.engine.connect() as connection:
        return _counted(connection)


def test_counts_follow_the_pipeline_and_equal_a_count_of_the_ledger(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    rig = outbound_rig(database, clock, fake)
    assert _scraped(database) == _oracle(database)
    first = message("telegram:1", "telegram", "4242", "hi", message_id="77")
    rig.arrive(first)
    rig.arrive(message("telegram:2", "telegram", "4243", "queued, never answered"))
    assert _scraped(database) == _oracle(database)
    session = rig.rig.session("dm:ent_tg")
    clock.advance(700)
    rig.answer(session, first, "hello")
    assert rig.pump() == ["sent"]
    assert _scraped(database) == _oracle(database)
    # A long reply whose first chunk is refused: the later ones are abandoned with it.
    fake.fail_next("telegram", 403, {"ok": False, "description": "Forbidden: blocked"})
    again = message("telegram:3", "telegram", "4242", "more", message_id="78")
    rig.arrive(again)
    clock.advance(3_000)
    rig.answer(session, again, THREE_CHUNKS)
    assert rig.pump() == ["failed"]
    scraped = _scraped(database)
    assert scraped == _oracle(database)
    assert ("telegram", "refused", 1) in scraped.delivery_failures
    [(_, _, abandoned)] = [row for row in scraped.delivery_failures if row[1] == "abandoned"]
    assert abandoned >= 2  # every later chunk of the reply
    assert scraped.turn_latency_count == 2
    # A second scrape with nothing new reads the same, and leaves no delta behind.
    assert _scraped(database) == scraped
    with database.engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM metric_deltas")).scalar() == 0


def test_a_ledger_that_predates_the_counts_starts_from_its_rows(tmp_path: Path) -> None:
    # Written at head, then migrated down to before the counts and up again: the migration
    # must count what the ledger already holds (today's code needs today's schema to write).
    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url)
    database = Database(url)
    try:
        with database.unit_of_work() as uow:
            chain = build_chain(uow.ledger, new_session(uow.ledger), 7)
            uow.commit()
        database.close()
        command.downgrade(alembic_config(url), "0005")
        upgrade(url)
        scraped = _scraped(database)
        assert scraped == _oracle(database)
        assert scraped.turn_latency_count == len(chain) and ("completed", 7) in scraped.turns
    finally:
        database.close()


def test_every_timer_tick_folds_the_deltas_where_nobody_scrapes(tmp_path: Path) -> None:
    from nexus.bootstrap import bootstrap_worker
    from nexus.doorbell import RecordingDoorbell
    from nexus.ingest.service import ingest
    from nexus.settings import Settings
    from workers import tasks

    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url)
    graph = bootstrap_worker(Settings(database_url=url))
    assert tasks._runtime() is graph
    with graph.database.unit_of_work() as uow:
        ingest(uow, [message("telegram:1", "telegram", "42", "hi")], RecordingDoorbell())
        uow.commit()

    def waiting() -> int:
        with graph.database.engine.connect() as connection:
            return int(connection.execute(text("SELECT COUNT(*) FROM metric_deltas")).scalar_one())

    assert waiting() > 0
    tasks.timer_tick()
    assert waiting() == 0
    with graph.database.engine.connect() as connection:
        total = connection.execute(
            text("SELECT n FROM metric_totals WHERE family = 'events' AND b = 'telegram'")
        ).scalar_one()
    assert total == 1
    graph.database.close()


def test_folds_racing_each_other_and_writers_lose_and_double_nothing(
    pg_database: Database,
) -> None:
    import threading

    from nexus.doorbell import RecordingDoorbell
    from nexus.ingest.service import ingest

    writing = threading.Event()
    writing.set()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(150):
                with pg_database.unit_of_work() as uow:
                    event = message(f"telegram:{n}", "telegram", str(n % 7), "hi")
                    ingest(uow, [event], RecordingDoorbell())
                    uow.commit()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            writing.clear()

    def scrape() -> None:
        try:
            while writing.is_set():
                with pg_database.unit_of_work() as uow:
                    uow.ledger.metrics.fold()
                    uow.commit()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=f) for f in (write, scrape, scrape)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert _scraped(pg_database) == _oracle(pg_database)
    assert ("inbound", "telegram", "pending", 150) in _scraped(pg_database).events
