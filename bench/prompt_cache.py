"""Prompt caching across turns: one session's turns through the turn service and the real anthropic
SDK against the fake Messages API, whose cache accounting is honest (it remembers each
breakpoint's prefix; tokens are characters / 4). The figure is the second turn's tokens
read from the cache, against all its prompt tokens: the context layers (persona, an
8 KB AGENTS.md, role rules, tools) and the first turn's history should come from the cache.
The fake's own accounting must equal what the ledger recorded for the turn."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench import harness
from nexus.adapters.anthropic.model import AnthropicModel
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.engine.query import QueryMessage
from nexus.engine.workspace import Workspace
from nexus.ledger.records import NewSession
from nexus.settings import Settings
from nexus.turns.service import TurnService
from tests.fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-sonnet-4-5"
AGENTS_MD = "\n".join(
    f"{n}. Keep answers short, cite the source, and say what you did not check." for n in range(110)
)  # about 8 KB, as a real AGENTS.md might be
TARGET_SHARE = 0.8  # of the second turn's prompt tokens, read from the cache


def _turn(turns: TurnService, database: Database, session_id: str, text: str) -> dict[str, int]:
    with database.unit_of_work() as uow:
        epoch = uow.ledger.sessions.claim(session_id)
        uow.commit()
    query = QueryMessage(text=text, platform="telegram", sender_name="Ada", occurred_at=1)
    outcome = turns.run_turn(session_id, [query], epoch=epoch)
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None and outcome.status == "committed"
    turn = view.turn
    return {
        "input_tokens": turn.prompt_tokens or 0,
        "cache_read": turn.cache_read_tokens or 0,
        "cache_write": turn.cache_write_tokens or 0,
    }


def run(*, quick: bool) -> dict[str, Any]:
    count = 3 if quick else 6
    with (
        harness.database() as url,
        FakeAnthropicServer() as fake,
        tempfile.TemporaryDirectory(prefix="nexus-bench-cache-") as directory,
    ):
        (Path(directory) / "AGENTS.md").write_text(AGENTS_MD)
        database = Database(url)
        try:
            turns = bootstrap(Settings(database_url=url, model="scripted"), database=database).turns
            port = AnthropicModel(api_key="sk-bench", base_url=fake.base_url, max_retries=0)
            turns.model_for = lambda name: port
            turns.default_model = MODEL
            turns.workspace = Workspace(Path(directory))
            with database.unit_of_work() as uow:
                persona = uow.ledger.agents.ensure("bench", system_prompt="You help travellers.")
                session = uow.ledger.sessions.ensure(
                    NewSession(label="bench:cache", persona_id=persona.id)
                )
                uow.commit()
            usage = []
            for number in range(count):
                fake.reply_text(f"Answer number {number}: Lisbon is lovely in May.")
                usage.append(_turn(turns, database, session.id, f"question {number}?"))
        finally:
            database.dispose()
        accounts = fake.cache_accounts
    if [u["cache_read"] for u in usage] != [a.cache_read for a in accounts]:
        raise AssertionError(f"the ledger's cache reads {usage} differ from the fake's {accounts}")
    second = usage[1]
    prompt = second["input_tokens"] + second["cache_read"] + second["cache_write"]
    return {
        "turns": usage,
        "second_turn_cache_read": second["cache_read"],
        "second_turn_prompt_tokens": prompt,
        "ratio": second["cache_read"] / prompt,
        "target": TARGET_SHARE,
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
