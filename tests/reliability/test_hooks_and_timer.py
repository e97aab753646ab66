"""A hook that raises and one that hangs beside one that works; two beats racing the timer.

The beats are `celery beat` with the real schedule and a one-second tick (the production
minute would make the scenario last minutes); the watermark is set 20 minutes back first, so
their first ticks race to catch up on the same minutes.
"""

from __future__ import annotations

import time
from pathlib import Path
from textwrap import dedent

import pytest

from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.hooks.registry import register_directory
from nexus.ledger.enums import BreakerState, Disposition, QueueMode
from nexus.settings import Settings
from tests.integration.processes import fast_beat
from tests.integration.session_support import cluster, user_texts
from tests.integration.worker_process import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
MINUTE = 60_000

HOOKS = {
    "raiser": """
        HOOK = HookMeta(name="raiser", timeout_s=2.0)

        def evaluate(ctx):
            raise RuntimeError("boom")
    """,
    "hanger": """
        import time

        HOOK = HookMeta(name="hanger", timeout_s=0.3)

        def evaluate(ctx):
            time.sleep(30)  # far past its timeout: abandoned, never waited for
            return HookResult()
    """,
    "echo": """
        HOOK = HookMeta(name="echo", timeout_s=2.0)

        def evaluate(ctx):
            if ctx.event.adapter != "telegram":
                return HookResult()
            return HookResult(
                fire=True,
                routing=Routing(kind="session", target="echoes"),
                prompt="echo: " + (ctx.event.text or ""),
            )
    """,
    "minutely": """
        HOOK = HookMeta(name="minutely", schedule="* * * * *", timeout_s=2.0)

        def evaluate(ctx):
            return HookResult()
    """,
}


def _hooks_dir(database: Database, tmp_path: Path, *names: str) -> Path:
    """The hooks directory every worker loads, registered as a deploy does."""
    directory = tmp_path / "hooks"
    directory.mkdir()
    header = "from nexus.hooks.spec import HookMeta, HookResult, Routing\n"
    for name in names:
        (directory / f"{name}.py").write_text(header + dedent(HOOKS[name]))
    problems: list[str] = []
    runner = bootstrap(Settings(hooks_dir=str(directory)), database=database).fresh_hook_runner(
        on_problem=problems.append
    )
    register_directory(runner, directory, problems, allow_empty=False)
    return directory


def _invocations(database: Database, hook: str) -> list[tuple[str, str | None, bool]]:
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT event_id, error, fired FROM hook_invocations WHERE hook_name = %(hook)s "
            "ORDER BY started_at",
            {"hook": hook},
        ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def _open_items(database: Database) -> int:
    with database.unit_of_work() as uow:
        return int(
            uow.connection.exec_driver_sql(
                "SELECT count(*) FROM queue_items WHERE status IN ('queued', 'claimed')"
            ).scalar_one()
        )


def test_a_raising_and_a_hanging_hook_delay_and_lose_nothing(
    watched_db: Database, tmp_path: Path
) -> None:
    hooks = _hooks_dir(watched_db, tmp_path, "raiser", "hanger", "echo")
    texts = [f"h{n}" for n in range(7)]
    with cluster(
        watched_db, tmp_path, mode=QueueMode.QUEUE, extra_env={"NEXUS_HOOKS_DIR": str(hooks)}
    ) as nodes:
        for number, message in enumerate(texts, start=1):
            started = time.monotonic()
            nodes.send([message])
            # One at a time: the breaker counts errors in a row, per event.
            wait_for(lambda n=number: len(_invocations(watched_db, "echo")) == n, what="hooks")
            assert time.monotonic() - started < 5, "a hook held up the event"
        wait_for(lambda: nodes.settled(len(texts)), timeout=60, what="every message answered")
        wait_for(lambda: _open_items(watched_db) == 0, timeout=60, what="the echoes answered")
        answered = [user_texts(view) for view in nodes.chain()]
        with watched_db.unit_of_work() as uow:
            echoes = uow.ledger.sessions.resolve("echoes")
            assert echoes is not None
            echoed = uow.ledger.queue.for_session(echoes.id)
            breakers: dict[str, str] = dict(
                uow.connection.exec_driver_sql("SELECT name, breaker_state FROM hooks").all()
            )
    assert answered == [[text] for text in texts]
    # Five errors in a row open each failing breaker: the sixth and seventh events skip it.
    raised, hung = _invocations(watched_db, "raiser"), _invocations(watched_db, "hanger")
    assert [error for _, error, _ in raised] == ["RuntimeError: boom"] * 5
    assert [error for _, error, _ in hung] == ["timed out after 0.3 s"] * 5
    assert breakers == {
        "raiser": BreakerState.OPEN,
        "hanger": BreakerState.OPEN,
        "echo": BreakerState.CLOSED,
    }
    # The healthy hook fired for every message, and each firing was answered once.
    assert [fired for _, _, fired in _invocations(watched_db, "echo")] == [True] * len(texts)
    assert len(echoed) == len(texts)
    assert {i.disposition for i in echoed} == {Disposition.CONSUMED}


def test_two_beats_tick_each_minute_once(watched_db: Database, tmp_path: Path) -> None:
    hooks = _hooks_dir(watched_db, tmp_path, "minutely")
    now_minute = int(time.time() * 1000) // MINUTE * MINUTE
    behind = now_minute - 20 * MINUTE
    with watched_db.unit_of_work() as uow:  # the beats were "down" for twenty minutes
        uow.connection.exec_driver_sql(
            "INSERT INTO timer_state (name, last_minute, updated_at) "
            "VALUES ('default', %(behind)s, %(behind)s)",
            {"behind": behind},
        )
        uow.commit()
    with (
        cluster(
            watched_db,
            tmp_path,
            mode=QueueMode.QUEUE,
            workers=2,
            beat=True,
            extra_env={"NEXUS_HOOKS_DIR": str(hooks)},
        ) as nodes,
        fast_beat(nodes.environment, tmp_path / "beat2.log"),
    ):
        beats = [tmp_path / "beat.log", tmp_path / "beat2.log"]

        def ticked_by_both() -> bool:
            return all(log.read_text().count("Sending due task") >= 3 for log in beats)

        wait_for(ticked_by_both, timeout=60, what="both beats to tick three times")
        wait_for(
            lambda: len(_invocations(watched_db, "minutely")) >= 20, what="the catch-up minutes"
        )
        time.sleep(1.0)  # a late duplicate would show up by now
        with watched_db.unit_of_work() as uow:
            minutes = list(
                uow.connection.exec_driver_sql(
                    "SELECT occurred_at FROM events WHERE adapter = 'timer' ORDER BY occurred_at"
                ).scalars()
            )
            watermark = uow.connection.exec_driver_sql(
                "SELECT last_minute FROM timer_state WHERE name = 'default'"
            ).scalar_one()
        invoked = [event_id for event_id, _, _ in _invocations(watched_db, "minutely")]
    # Every minute since the watermark exactly once, in order, and the watermark on the last.
    assert minutes == list(range(behind + MINUTE, watermark + MINUTE, MINUTE))
    assert len(minutes) >= 20
    assert sorted(invoked) == sorted(set(invoked)), "a minute was evaluated twice"
    assert len(invoked) == len(minutes)
