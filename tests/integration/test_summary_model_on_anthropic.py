"""NEXUS_SUMMARY_MODEL through the real anthropic SDK and the fake Messages API: the
summary request goes to the summary model, turns to the turn model, on Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from nexus.bootstrap import bootstrap
from nexus.compaction.summarize import SUMMARIZER_PROMPT
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import TurnType
from nexus.ledger.models import Compaction, table_of
from nexus.settings import Settings
from tests.contract.engine_support import build_rig
from tests.fakes.anthropic_server import (
    Answer,
    FakeAnthropicServer,
    Received,
    message_end,
    message_start,
    text_block,
    with_ping,
)
from tests.support import FakeClock

TURN_MODEL = "claude-sonnet-4-6"
SUMMARY_MODEL = "claude-haiku-4-5"


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def _summary_answer(received: Received) -> Answer:
    """A summary, reported under the model the request named (as the real API does)."""
    events = [
        message_start(model=received.body["model"], input_tokens=300),
        *text_block(0, "Summary: the invoice is INV-7, due Friday."),
        *message_end("end_turn", 14),
    ]
    return Answer(events=with_ping(events))


def test_a_tool_asked_compaction_is_summarised_by_the_summary_model(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    settings = Settings(
        anthropic_api_key="sk-test",
        anthropic_base_url=fake.base_url,
        model=TURN_MODEL,
        summary_model=SUMMARY_MODEL,
    )
    rig = build_rig(pg_database, clock)
    rig.turns = bootstrap(settings, database=pg_database, doorbell=RecordingDoorbell()).turns
    session = rig.session(capabilities=["compaction"])
    fake.reply_text("Noted: INV-7, due Friday.")
    rig.say(session.id, "the invoice is INV-7, due Friday")
    fake.reply_tool_uses([("compact_context", {"instructions": "keep invoice numbers"})])
    fake.reply_text("Compacting after this answer.")
    fake.reply(_summary_answer)
    outcome = rig.say(session.id, "we are done with invoices; tidy up")

    assert outcome.status == "committed"
    assert [c.status for c in outcome.compactions] == ["committed"]
    assert [r.body["model"] for r in fake.requests] == [TURN_MODEL] * 3 + [SUMMARY_MODEL]
    summary_request = fake.requests[-1].body
    assert SUMMARIZER_PROMPT in str(summary_request["system"])
    assert "keep invoice numbers" in str(summary_request["system"])
    assert "tools" not in summary_request
    compaction_id = outcome.compactions[0].turn_id or ""
    with pg_database.unit_of_work() as uow:
        turn = uow.ledger.threads.get_turn(outcome.turn_id)
        compacted = uow.ledger.threads.get_turn(compaction_id)
    with pg_database.engine.connect() as connection:
        row = connection.execute(
            select(table_of(Compaction)).where(table_of(Compaction).c.turn_id == compaction_id)
        ).one()
    assert turn is not None and turn.turn.model == TURN_MODEL
    assert compacted is not None and compacted.turn.turn_type == TurnType.COMPACTION
    assert compacted.turn.model == SUMMARY_MODEL
    assert (row.model, row.provider) == (SUMMARY_MODEL, "anthropic")
    assert (row.summarization_input_tokens, row.summarization_output_tokens) == (300, 14)
    assert row.summary == "Summary: the invoice is INV-7, due Friday."
