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
