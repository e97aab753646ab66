"""Many concurrent messages to one session in each queue mode, on two worker processes.

The CI variant sends 100 per mode (all six modes take about 80 s together); the heavy
variant (NEXUS_RELIABILITY_HEAVY=1) sends the issue's 500 per mode. The checker verifies
one linear chain, one run at a time and arrival order, with the modes' own exceptions
(a steer is injected into whichever turn runs; interrupt and collect batch).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueMode, TurnStatus
from tests.integration.session_support import cluster
from tests.integration.worker_process import wait_for
from tests.reliability.scale import pick

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
MESSAGES = pick(100, 500)

# What may become of an input in each mode once everything has settled.
ALLOWED = {
    QueueMode.QUEUE: {Disposition.CONSUMED},
    QueueMode.FOLLOWUP: {Disposition.CONSUMED},
    QueueMode.STEER: {Disposition.CONSUMED, Disposition.INJECTED},
    QueueMode.STEER_BACKLOG: {Disposition.CONSUMED, Disposition.INJECTED},
    QueueMode.INTERRUPT: {Disposition.CONSUMED, Disposition.BATCHED},
    QueueMode.COLLECT: {Disposition.CONSUMED, Disposition.BATCHED},
}


@pytest.mark.parametrize("mode", list(QueueMode), ids=[m.value for m in QueueMode])
def test_concurrent_messages_to_one_session(
    watched_db: Database, tmp_path: Path, mode: QueueMode
) -> None:
    texts = [f"{mode.value}-{n:03d}" for n in range(MESSAGES)]
    uncapped = {"NEXUS_QUEUE_CAP": str(MESSAGES * 2)}  # order and batching, not overflow
    with cluster(watched_db, tmp_path, mode=mode, workers=2, extra_env=uncapped) as nodes:
        nodes.send(texts, concurrency=16)
        wait_for(lambda: nodes.settled(MESSAGES), timeout=MESSAGES * 2, what="every message")
        items = nodes.items()
        chain = nodes.chain()
    assert len(items) == MESSAGES
    dispositions = {i.disposition for i in items}
    assert dispositions <= ALLOWED[mode], dispositions
    answered = {i.consumed_by_turn_id for i in items}
    assert answered <= {view.turn.id for view in chain}
    statuses = {view.turn.status for view in chain}
    if mode in (QueueMode.QUEUE, QueueMode.FOLLOWUP):
        assert len(chain) == MESSAGES and statuses == {TurnStatus.COMPLETED}
    if mode == QueueMode.COLLECT:
        assert len(chain) < MESSAGES // 2, "collect should have batched the burst"
    if mode != QueueMode.INTERRUPT:
        assert statuses == {TurnStatus.COMPLETED}


def test_a_burst_of_50_in_collect_mode_while_a_turn_runs_takes_at_most_2_more_turns(
    watched_db: Database, tmp_path: Path
) -> None:
    from tests.fakes.anthropic_server import FakeAnthropicServer
    from tests.integration.session_support import on_fake_model, user_texts

    burst = [f"collect-{n:02d}" for n in range(50)]
    with FakeAnthropicServer() as fake:
        fake.reply_text("a slow first answer " * 5, chunks=10, delay_s=0.3)  # ~3 s
        for n in range(3):
            fake.reply_text(f"answer {n}")
        with cluster(
            watched_db,
            tmp_path,
            mode=QueueMode.COLLECT,
            workers=2,
            extra_env={**on_fake_model(fake), "NEXUS_QUEUE_CAP": "100"},
        ) as nodes:
            nodes.send(["first"])
            wait_for(lambda: len(fake.requests) == 1, what="the first turn to start")
            nodes.send(burst, concurrency=16)
            wait_for(lambda: nodes.settled(51), timeout=60, what="the burst answered")
            items = nodes.items()
            chain = nodes.chain()
    assert len(items) == 51 and {i.status.value for i in items} == {"done"}
    later = [view for view in chain if "first" not in user_texts(view)]
    assert 1 <= len(later) <= 2, [user_texts(view) for view in later]
    # Every message of the burst is in the ledger and was put to the model in one of them.
    asked = sorted(text for view in later for text in user_texts(view))
    assert asked == sorted(burst)
