"""A worker whose link to Postgres is cut mid-turn, while it still reaches Redis
(tests/reliability/links.py).

Every process is real (`nexus api`, two Celery workers) on the shared Postgres and Redis;
each worker's database connections go through a `Link` of its own. The cut-off worker still
holds its session's lease, and its keep-alive, which talks to Redis, goes on extending it:
only a bound on its database round trips (NEXUS_DATABASE_TIMEOUT_SECONDS) ends the turn, so
that the lease is released and the other worker takes over.
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
    SLACK_S,
    WATCHDOG_S,
    Poster,
    base_environment,
    cut_mid_turn,
    deploy,
    fake,
    lost_attempts,
    postgres_target,
    postgres_through,
    replies_sent,
    settled,
)
from tests.reliability.watch import InvariantWatch

__all__ = ["fake"]  # the fixture, for pytest
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
# The workers' bound on a database round trip (a statement, a connection): the cut-off
# worker gives its connection up after this, rather than waiting on it as long as TCP lets
# it (through this proxy, which keeps the TCP connection alive: for ever).
DB_TIMEOUT_S = 2.0
STREAM_S = 3.0  # how long the interrupted answer streams (the turn reaches Postgres after)
# The stream's end, then the checkout's ping and a new connection, each bounded, the turn's
# failure (one more connection), the lease released, the other worker's watchdog (whose ring
# may first reach the cut-off worker, whose run fails on its connection), its claim. The
# answer after it takes a model call (up to 16 s on a loaded two-core machine), which is no
# part of the bound.
TAKEOVER_S = STREAM_S + 4 * (DB_TIMEOUT_S + 1) + 3 * WATCHDOG_S + SLACK_S


def test_a_worker_cut_from_postgres_mid_turn_gives_up_and_is_taken_over(
    pg_database: Database,
    invariants: InvariantWatch,
    fake: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    """The cut-off worker's turn cannot commit: its database calls time out, the turn ends
    and releases its lease, and the other worker (its watchdog: no beat runs, so the
    takeover is the workers' own) reclaims the input, records the lost attempt and answers
    it, all while the link is still cut. After the heal the cut-off worker answers alone."""
    fake.reply_text("a long answer the cut interrupts " * 4, chunks=20, delay_s=STREAM_S / 20)
    fake.reply_text("the answer after the cut")
    fake.reply_text("the answer after the heal")
    database = pg_database
    with (
        FakePlatforms() as platforms,
        Link(postgres_target(database)) as link_0,
        Link(postgres_target(database)) as link_1,
        ExitStack() as stack,
    ):
        invariants.watch(database, platforms=platforms)
        environment = {
            **base_environment(database, platforms),
            **on_fake_model(fake),
            "NEXUS_DATABASE_TIMEOUT_SECONDS": str(DB_TIMEOUT_S),
        }
        links = [link_0, link_1]
        deployment = deploy(
            stack,
            tmp_path,
            environment,
            [{**environment, **postgres_through(link, database)} for link in links],
            queues="events,sessions,delivery",  # no timer: no beat, no relay
        )
        workers, logs = deployment.workers, deployment.logs
        poster = Poster(deployment.client)
        cut_off, cut_at, took = cut_mid_turn(
            database, fake, poster, deployment, links, timeout=TAKEOVER_S
        )
        print(
            f"\ntaken over {took:.1f} s after the cut (bound {TAKEOVER_S:.1f} s), answered "
            f"{time.monotonic() - cut_at:.1f} s after it, still cut"
        )
        assert links[cut_off].is_cut
        # The cut-off run could record nothing: the taker-over reclaimed its claim.
        assert lost_attempts(database) == ["worker_lost"]

        links[cut_off].heal()
        healed = time.monotonic()
        assert workers[cut_off].poll() is None, logs[cut_off].read_text()[-3000:]
        healed_at = len(logs[cut_off].read_bytes())
        wait_for(lambda: replies_sent(database), timeout=60, what="the first reply sent")
        # The cut-off worker alone now: it answers what comes, on fresh connections.
        stop(workers[1 - cut_off])
        assert poster.post(2, sender=2) == 200
        wait_for(lambda: settled(database, 2), timeout=60, what="the cut-off worker's answer")
        wait_for(lambda: replies_sent(database), timeout=60, what="its reply sent")
        print(f"the cut-off worker answered alone {time.monotonic() - healed:.1f} s after the heal")
        after = logs[cut_off].read_bytes()[healed_at:].count(b"] succeeded in")
        assert after >= 2  # the message's routing (with its turn) and its reply at least
        replies = [str(m.body.get("text")) for m in platforms.of("telegram")]
        assert "the answer after the cut" in replies
        assert "the answer after the heal" in replies
        assert not any(r.startswith("a long answer the cut interrupts") for r in replies)
        invariants.check(database)
