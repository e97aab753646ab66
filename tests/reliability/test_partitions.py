"""Processes that keep running while their link to Redis is cut (tests/reliability/links.py).

Every process here is real (`nexus api`, Celery workers) on the shared Postgres and Redis;
each worker's (or the API's) Redis connections go through a `Link` of its own, which the
scenario cuts like a dead switch while the process still reaches Postgres.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from nexus.db import Database
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.platform_server import FakePlatforms
from tests.integration.session_support import on_fake_model
from tests.integration.worker_process import stop, wait_for
from tests.reliability.links import Link
from tests.reliability.partition_support import (
    TAKEOVER_S,
    Poster,
    base_environment,
    cut_mid_turn,
    deploy,
    fake,
    lost_attempts,
    redis_target,
    redis_through,
    replies_sent,
    settled,
)
from tests.reliability.scale import pick
from tests.reliability.watch import InvariantWatch

__all__ = ["fake"]  # the fixture, for pytest
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
CUT_S = pick(3.0, 30.0)  # how long the API's link stays cut
API_MESSAGES = pick(40, 300)


@pytest.mark.parametrize("reset", [False, True], ids=["dead-switch", "reset"])
def test_a_worker_cut_from_redis_mid_turn_is_taken_over_without_beat(
    reset: bool,
    pg_database: Database,
    invariants: InvariantWatch,
    fake: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    """The cut-off worker's turn times out on Redis and puts its input back with a backoff;
    it can neither ring for the retry nor release its lease. With no beat running, the
    other worker's watchdog must find the overdue input once the lease lapses, and answer
    it; the lost attempt is on record; after the heal the cut-off worker works again.
    `reset`: the link resets its connections rather than going silent."""
    fake.reply_text("a long answer the cut interrupts " * 10, chunks=80, delay_s=0.25)  # ~20 s
    fake.reply_text("the answer after the cut")
    for n in range(5):
        fake.reply_text(f"answer {n} after the heal")
    database = pg_database
    with (
        FakePlatforms() as platforms,
        Link(redis_target()) as link_0,
        Link(redis_target()) as link_1,
        ExitStack() as stack,
    ):
        invariants.watch(database, platforms=platforms)
        environment = {**base_environment(database, platforms), **on_fake_model(fake)}
        links = [link_0, link_1]
        deployment = deploy(
            stack,
            tmp_path,
            environment,
            [{**environment, **redis_through(link)} for link in links],
            queues="events,sessions,delivery",  # no timer: no beat, no relay
        )
        workers, logs = deployment.workers, deployment.logs
        poster = Poster(deployment.client)
        # The bound is on the takeover, the other worker's claim (the cut-off one cannot
        # claim: its lease is on Redis); its answer then takes a model call, whose time on a
        # loaded machine is no part of what the design promises.
        cut_off, cut_at, took = cut_mid_turn(
            database, fake, poster, deployment, links, timeout=TAKEOVER_S + 30, reset=reset
        )
        print(
            f"\ntaken over {took:.1f} s after the cut (bound {TAKEOVER_S:.1f} s), "
            f"answered {time.monotonic() - cut_at:.1f} s after it"
        )
        assert took <= TAKEOVER_S
        # The lost attempt is on record once: by the cut-off run (it put its input back)
        # or by the taker-over (it reclaimed the claim), never both.
        assert len(lost_attempts(database)) == 1
        assert lost_attempts(database)[0] in ("turn_crashed", "worker_lost")
        assert links[1 - cut_off].connections > 0 and not links[1 - cut_off].is_cut

        links[cut_off].heal()
        if workers[cut_off].poll() is not None:
            # Reset connections can end the Celery worker itself (kombu 5.7: "Unrecoverable
            # error: AttributeError ... 'hostname'" while acking over a lost connection), as
            # test_services.py's Supervisor knows; the restart policy starts it again.
            assert reset and "'hostname'" in logs[cut_off].read_text()
            deployment.restart(cut_off)
            print("the cut-off worker exited on the reset and was started again")
        healed_at = len(logs[cut_off].read_bytes())
        for number, sender in ((2, 1), (3, 2), (4, 3), (5, 4)):
            assert poster.post(number, sender=sender) == 200
        wait_for(lambda: settled(database, 5), timeout=60, what="the messages after the heal")
        wait_for(lambda: replies_sent(database), timeout=60, what="every reply sent")
        assert workers[cut_off].poll() is None, logs[cut_off].read_text()[-3000:]
        # The cut-off worker alone now: it answers what comes (once its broker connection
        # is back; a reset one reconnects with a backoff).
        stop(workers[1 - cut_off])
        assert poster.post(6, sender=5) == 200
        wait_for(lambda: settled(database, 6), timeout=60, what="the cut-off worker's answer")
        wait_for(lambda: replies_sent(database), timeout=60, what="its reply sent")
        after = logs[cut_off].read_bytes()[healed_at:].count(b"] succeeded in")
        print(f"the cut-off worker ran {after} tasks after the heal")
        assert after >= 2  # the message's routing (with its turn) and its reply at least
        replies = [str(m.body.get("text")) for m in platforms.of("telegram")]
        assert "the answer after the cut" in replies
        assert not any(r.startswith("a long answer the cut interrupts") for r in replies)
        invariants.check(database)


def test_the_api_cut_from_redis_answers_2xx_or_503_and_loses_nothing_accepted(
    pg_database: Database,
    invariants: InvariantWatch,
    tmp_path: Path,
) -> None:
    """Webhooks keep arriving while the API's link to Redis is cut: each is accepted (2xx,
    stored) or refused (503, for the platform to send again); every accepted one is
    answered once the link heals."""
    database = pg_database
    with FakePlatforms() as platforms, Link(redis_target()) as link, ExitStack() as stack:
        invariants.watch(database, platforms=platforms)
        environment = base_environment(database, platforms)
        deployment = deploy(
            stack,
            tmp_path,
            {**environment, **redis_through(link)},
            [environment, environment],
            queues="events,sessions,delivery,timer",
            beat=environment,
            client_timeout=15,
        )
        poster = Poster(deployment.client)
        before = API_MESSAGES // 4
        for number in range(before):
            assert poster.post(number, sender=number % 3) == 200
        link.cut()
        cut_until = time.monotonic() + CUT_S
        number = before
        while time.monotonic() < cut_until or number < before * 2:
            poster.post(number, sender=number % 3)
            number += 1
        link.heal()
        during, slowest_s = number - before, poster.slowest_s
        while number < API_MESSAGES:
            poster.post(number, sender=number % 3)
            number += 1
        statuses = {status for codes in poster.answers.values() for status in codes}
        print(
            f"\n{during} webhooks while the API's Redis link was cut: statuses "
            f"{sorted(statuses)}, the slowest answer {slowest_s:.2f} s"
        )
        assert statuses <= {200, 503}, poster.answers
        for refused in [n for n, codes in poster.answers.items() if codes[-1] != 200]:
            assert poster.post(refused, sender=refused % 3) == 200  # the platform's retry
        wait_for(lambda: settled(database, API_MESSAGES), timeout=120, what="every input answered")
        wait_for(lambda: replies_sent(database), timeout=60, what="every reply sent")
        invariants.check(database)
