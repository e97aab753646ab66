"""Context layers: their order, the manager and worker rules, and where the cache breakpoints go."""

from __future__ import annotations

from typing import Any

from nexus.engine.layers import (
    CACHE_CONTROL,
    mark_last_block,
    system_blocks,
)
from nexus.engine.model import Block, ToolSpec
from nexus.ledger.enums import SessionOrigin
from nexus.ledger.records import AgentRecord, SessionRecord

PERSONA = AgentRecord(
    id="ag_1",
    name="atlas",
    system_prompt="You plan trips.",
    default_model=None,
    permissions={},
    status="active",
)
TOOLS = [ToolSpec(name, "", {"type": "object"}) for name in ("agent_send", "current_time")]


def _session(**fields: Any) -> SessionRecord:
    base: dict[str, Any] = {
        "id": "ses_1",
        "label": "dm:ent_boss",
        "persona_id": PERSONA.id,
        "thread_id": None,
        "epoch": 1,
        "origin": SessionOrigin.USER,
        "status": "active",
        "created_at": 0,
        "updated_at": 0,
    }
    return SessionRecord(**{**base, **fields})


def _texts(blocks: tuple[Block, ...]) -> list[str]:
    return [block["text"] for block in blocks]


def test_layers_come_in_order_and_only_the_last_stable_one_is_a_breakpoint() -> None:
    blocks = system_blocks(
        persona=PERSONA,
        session=_session(),
        workspace="[Workspace file AGENTS.md]\nBe brief.",
        prompt_additions=["You can use the test tools.", "  "],
        tools=TOOLS,
    )
    texts = _texts(blocks)
    assert texts[0] == "You are atlas.\n\nYou plan trips."
    assert texts[1].startswith("[Workspace file AGENTS.md]")
    assert texts[2].startswith("[Your role: manager agent]")
    assert texts[3] == "You can use the test tools."
    assert texts[4] == "Tools you may use: agent_send, current_time."
    assert len(blocks) == 5  # the blank addition is left out
    assert [block.get("cache_control") for block in blocks] == [None] * 4 + [CACHE_CONTROL]


def test_the_manager_layer_says_where_replies_go_and_how_to_dispatch() -> None:
    with_agents = _texts(
        system_blocks(persona=PERSONA, session=None, workspace="", prompt_additions=[], tools=TOOLS)
    )
    without = _texts(
        system_blocks(persona=PERSONA, session=None, workspace="", prompt_additions=[], tools=[])
    )
    assert "goes to the channel" in with_agents[1] or "sends it to the channel" in with_agents[1]
    assert "agent_send" in with_agents[1]
    assert "agent_send" not in without[1]  # no dispatch advice without the tool
    assert without[-1] == "You have no tools in this conversation."


def test_a_worker_gets_its_task_and_how_to_report_instead_of_the_manager_rules() -> None:
    worker = _session(
        label="worker:w1",
        origin=SessionOrigin.SUBAGENT,
        is_subagent=True,
        parent_session_label="dm:ent_boss",
        task_description="price the flights to Lisbon",
    )
    tools = [*TOOLS, ToolSpec("reply_to_caller", "", {"type": "object"})]
    texts = _texts(
        system_blocks(
            persona=PERSONA, session=worker, workspace="", prompt_additions=[], tools=tools
        )
    )
    role = texts[1]
    assert role.startswith("[Your role: worker agent]")
    assert "dm:ent_boss" in role and "price the flights to Lisbon" in role
    assert "reply_to_caller" in role
    assert "manager agent]" not in "\n".join(texts)
    assert texts[0] == "You are atlas.\n\nYou plan trips."  # the manager's identity, inherited


def test_the_history_breakpoint_copies_and_skips_thinking() -> None:
    answer: list[Block] = [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "Lisbon it is."},
    ]
    marked = mark_last_block(answer)
    assert marked[1]["cache_control"] == CACHE_CONTROL
    assert "cache_control" not in marked[0]
    assert all("cache_control" not in block for block in answer)  # the memo is untouched
    only_thinking: list[Block] = [{"type": "thinking", "thinking": "hm", "signature": "s"}]
    assert mark_last_block(only_thinking) == only_thinking
