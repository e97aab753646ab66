"""Bursts in every queue mode to cold workers: freshly started `nexus api` and worker
processes, the real Anthropic SDK against the local fake (each worker imports it on its
first turn: seconds of setup while the first turns wait). Every mode's burst goes to
sessions of its own through the API, whose every message raises its session's signal; a
platform's webhooks burst into one more session meanwhile. Every input reaches a completed
turn (directly, or folded into a later one after a later input interrupted its turn) or
has a disposition that says why; none is left in a turn that only its own arrival aborted
(the invariant checker's `[interrupt]` rule, run after the scenario)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from nexus.db import Database
from nexus.ledger.enums import QueueMode, QueueStatus, TurnStatus
from nexus.ledger.records import QueueItemRecord, TurnView
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.processes import nexus_process
from tests.integration.session_support import LABEL, cluster, on_fake_model
from tests.integration.worker_process import wait_for
from tests.reliability.scale import pick
from tests.reliability.test_queue_modes import ALLOWED
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
# Per mode: fresh sessions that get one message each (the first turns, all on cold workers),
# then one session that gets a burst.
SINGLES, BURST = pick(2, 10), pick(4, 50)
WEBHOOKS = pick(8, 100)
TOKEN = "cold-bursts"


def _session(database: Database, label: str) -> tuple[list[QueueItemRecord], list[TurnView]]:
    with database.reading() as uow:
        session = uow.ledger.sessions.resolve(label)
        if session is None:
            return [], []
        items = uow.ledger.queue.for_session(session.id)
        head = session.thread_id
        return items, uow.ledger.threads.read_ancestry(head) if head else []


def test_bursts_in_every_mode_to_cold_workers_answer_every_input(
    watched_db: Database, tmp_path: Path
) -> None:
    singles = {f"cold:{mode.value}:{k}": mode for mode in QueueMode for k in range(SINGLES)}
    bursts = {f"cold:{mode.value}:burst": mode for mode in QueueMode}
    sends = [(label, 0) for label in singles]
    sends += [(label, n) for n in range(BURST) for label in bursts]
    bursts |= singles
    api_port = free_port()
    with FakeAnthropicServer() as fake, ExitStack() as stack:
        for n in range((len(sends) + WEBHOOKS) * 3):  # more than the runs ask
            fake.reply_text(f"answer {n}", chunks=4)
        settings = {**on_fake_model(fake), "NEXUS_QUEUE_CAP": "1000"}
        nodes = stack.enter_context(
            cluster(watched_db, tmp_path, mode=QueueMode.INTERRUPT, workers=2, extra_env=settings)
        )
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **nodes.environment,
            "NEXUS_API_TOKENS": TOKEN,
        }
        stack.enter_context(
            nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", environment)
        )
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        client = stack.enter_context(
            httpx.Client(
                base_url=f"http://127.0.0.1:{api_port}",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=30,
            )
        )

        def send(position: int) -> None:
            if position >= len(sends):
                nodes.send([f"webhook-{position:03d}"])
                return
            label, n = sends[position]
            body = {"content": f"{label} #{n}", "mode": bursts[label].value}
            sent = client.post(f"/v1/sessions/{label}/messages", json=body)
            assert sent.status_code == 202, sent.text

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(send, range(len(sends) + WEBHOOKS)))

        def settled() -> bool:
            found = [_session(watched_db, label)[0] for label in [*bursts, LABEL]]
            return sum(map(len, found)) == len(sends) + WEBHOOKS and all(
                i.status in (QueueStatus.DONE, QueueStatus.DEAD) for f in found for i in f
            )

        wait_for(settled, timeout=180, what="every input settled")
    for label, mode in [*bursts.items(), (LABEL, QueueMode.INTERRUPT)]:
        items, chain = _session(watched_db, label)
        assert {i.disposition for i in items} <= ALLOWED[mode], (label, items)
        statuses = [view.turn.status for view in chain]
        assert statuses and statuses[-1] == TurnStatus.COMPLETED, (label, statuses)
        if mode != QueueMode.INTERRUPT:  # nothing else aborts a turn
            assert set(statuses) == {TurnStatus.COMPLETED}, (label, statuses)
