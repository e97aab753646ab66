"""Pure engine decisions: permissions, compaction plans, budgets, the /compact command."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexus.compaction.policy import (
    OVERFLOW_TARGET,
    PROACTIVE_TARGET,
    TurnCost,
    manual_compaction_request,
    plan_compaction,
    should_compact,
)
from nexus.engine import budget
from nexus.engine.permissions import ToolPermissions, from_persona, tool_allowed


def test_deny_beats_a_broader_allow() -> None:
    permissions = from_persona({"tools": {"allow": ["fs.*"], "deny": ["fs.write*"]}})
    assert tool_allowed("fs.read", permissions)
    assert not tool_allowed("fs.write_file", permissions)
    assert not tool_allowed("web.fetch", permissions)  # not in the allow list


def test_no_permissions_allow_everything_and_deny_alone_limits() -> None:
    assert tool_allowed("anything", from_persona({}))
    only_deny = from_persona({"tools": {"deny": ["shell"]}})
    assert not tool_allowed("shell", only_deny) and tool_allowed("noop", only_deny)


@pytest.mark.parametrize(
    "permissions",
    [
        {"tools": "all"},
        {"tools": {"allow": "x"}},
        {"tools": {"allow": [""]}},
        {"tools": {"al": []}},
    ],
)
def test_malformed_permissions_are_refused_clearly(permissions: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"permissions\.tools"):
        from_persona(permissions)


names = st.text(alphabet="abcdefgh._*", min_size=1, max_size=8)


@given(name=names, allow=st.lists(names, max_size=3), deny=st.lists(names, min_size=1, max_size=3))
def test_a_denied_name_is_never_allowed_whatever_the_allow_list(
    name: str, allow: list[str], deny: list[str]
) -> None:
    permissions = ToolPermissions(allow=(*allow, name, "*"), deny=(*deny, name))
    assert not tool_allowed(name, permissions)


def test_compaction_triggers_at_85_percent() -> None:
    assert not should_compact(849, 1000)
    assert should_compact(850, 1000)


def _costs(tokens: list[int]) -> list[TurnCost]:
    return [TurnCost(turn_id=f"t{i:03d}", tokens=n) for i, n in enumerate(tokens)]


def test_plan_keeps_the_newest_turns_that_fit_the_target() -> None:
    turns = _costs([100] * 10)
    plan = plan_compaction(
        turns, window=1000, target_ratio=PROACTIVE_TARGET, fixed_tokens=100, summary_reserve=50
    )
    assert plan is not None
    assert plan.kept == ("t006", "t007", "t008", "t009")  # 450 budget → 4 turns of 100
    assert plan.summarized_through_turn_id == "t005" and plan.first_kept_turn_id == "t006"
    assert plan.tokens_before == 1000 and plan.tokens_kept == 400


def test_plan_is_none_when_everything_fits_and_keeps_nothing_when_one_turn_is_too_big() -> None:
    small = _costs([10, 10])
    assert plan_compaction(small, window=1000, target_ratio=0.6, fixed_tokens=0,
                           summary_reserve=0) is None  # fmt: skip
    huge = _costs([10, 5000])
    plan = plan_compaction(huge, window=1000, target_ratio=OVERFLOW_TARGET, fixed_tokens=0,
                           summary_reserve=0)  # fmt: skip
    assert plan is not None and plan.kept == () and plan.first_kept_turn_id is None


@given(
    tokens=st.lists(st.integers(min_value=0, max_value=500), max_size=40),
    window=st.integers(min_value=100, max_value=5000),
    ratio=st.sampled_from([0.0, OVERFLOW_TARGET, PROACTIVE_TARGET]),
    fixed=st.integers(min_value=0, max_value=500),
)
def test_plan_properties(tokens: list[int], window: int, ratio: float, fixed: int) -> None:
    turns = _costs(tokens)
    plan = plan_compaction(turns, window=window, target_ratio=ratio, fixed_tokens=fixed,
                           summary_reserve=0)  # fmt: skip
    if plan is None:
        assert sum(tokens) <= window * ratio - fixed or not turns
        return
    ids = [t.turn_id for t in turns]
    assert list(plan.summarized) + list(plan.kept) == ids  # order kept, nothing lost
    assert list(plan.kept) == ids[len(ids) - len(plan.kept) :]  # kept is a suffix
    assert plan.summarized  # at least one turn goes into the summary
    assert plan.tokens_kept <= max(0, window * ratio - fixed) or not plan.kept


@pytest.mark.parametrize(
    ("text", "instructions"),
    [("/compact", None), ("  /compact  ", None), ("/compact focus on X", "focus on X"),
     ("/compact\nkeep the dates", "keep the dates")],
)  # fmt: skip
def test_the_compact_command(text: str, instructions: str | None) -> None:
    found = manual_compaction_request(text)
    assert found is not None and found.instructions == instructions


@pytest.mark.parametrize("text", ["/compaction", "please /compact", "compact", "/compactX y"])
def test_other_text_is_not_the_compact_command(text: str) -> None:
    assert manual_compaction_request(text) is None


def test_model_windows_match_the_longest_prefix_and_default_to_128k() -> None:
    assert budget.context_window("claude-sonnet-4-5-20250929") == 200_000
    assert budget.context_window("scripted") == 200_000
    assert budget.context_window("some-other-model") == budget.DEFAULT_WINDOW == 128_000


def test_estimates_are_four_characters_a_token_and_exact_usage_wins() -> None:
    assert budget.estimate_text_tokens("") == 0
    assert budget.estimate_text_tokens("abcde") == 2
    blocks = [{"type": "text", "text": "a" * 40}, {"type": "tool_result", "content": "b" * 8}]
    assert budget.estimate_block_tokens(blocks) == 12
    assert budget.context_tokens(known_prompt_tokens=None, known_completion_tokens=None,
                                 estimated_after=7) == 7  # fmt: skip
    assert budget.context_tokens(known_prompt_tokens=1000, known_completion_tokens=50,
                                 estimated_after=7) == 1057  # fmt: skip
