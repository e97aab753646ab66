"""PrefixSums: a sum over a request's messages that measures only what is new."""

from __future__ import annotations

from typing import Any

from nexus.engine.prefix_sums import PrefixSums


def _size(message: Any) -> int:
    return len(str(message["content"]))


def _history(turns: int, tag: str = "") -> list[dict[str, Any]]:
    return [
        {"role": role, "content": [{"type": "text", "text": f"{tag}{role} {n}"}]}
        for n in range(turns)
        for role in ("user", "assistant")
    ]


def _copied(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As the turn machine hands them over: new dicts around the same content lists."""
    return [dict(message) for message in messages]


def test_an_extended_request_measures_only_its_new_messages() -> None:
    sums, history = PrefixSums(_size), _history(50)
    assert sums.total(history) == sum(map(_size, history))
    assert sums.measured == 100
    grown = [*_copied(history), *_history(1, "new ")]
    assert sums.total(grown) == sum(map(_size, grown))
    assert sums.measured == 102


def test_whatever_differs_is_measured_again_from_there() -> None:
    sums, history = PrefixSums(_size), _history(10)
    sums.total(history)
    changed = _copied(history)
    changed[5] = {"role": "assistant", "content": [{"type": "text", "text": "longer " * 9}]}
    assert sums.total(changed) == sum(map(_size, changed))
    assert sums.measured == 20 + 15  # from the changed message on
    # The same content in another role, or with more keys than role and content, differs.
    recast = _copied(changed)
    recast[3] = {"role": "user", "content": changed[3]["content"]}
    recast[8] = {**changed[8], "cache_control": {"type": "ephemeral"}}
    assert sums.total(recast) == sum(map(_size, recast))
    assert sums.measured == 35 + 17
    again = _copied(recast)
    assert sums.total(again) == sum(map(_size, again))
    assert sums.measured == 52 + 12  # the extra-keys message is never taken as shared


def test_a_shorter_request_and_a_new_first_message_are_summed_right() -> None:
    sums, history = PrefixSums(_size), _history(10)
    sums.total(history)
    assert sums.total(_copied(history[:7])) == sum(map(_size, history[:7]))
    assert sums.measured == 20  # wholly shared
    compacted = [{"role": "user", "content": [{"type": "text", "text": "a summary"}]}]
    compacted += _copied(history[12:])
    assert sums.total(compacted) == sum(map(_size, compacted))
    assert sums.measured == 20 + 9
    assert sums.total([]) == 0


def test_conversations_keep_their_own_prefixes_within_the_bounds() -> None:
    sums = PrefixSums(_size, conversations=2, messages=50)
    ann, bob, cat = _history(10, "ann "), _history(10, "bob "), _history(10, "cat ")
    for history in (ann, bob, ann, bob):
        assert sums.total(_copied(history)) == sum(map(_size, history))
    assert sums.measured == 40  # each measured once, the second time shared
    sums.total(cat)  # a third conversation: the least recently used (ann) goes
    sums.total(_copied(ann))
    assert sums.measured == 40 + 20 + 20
    long = _history(30, "long ")  # more than all that is held together: not kept
    sums.total(long)
    sums.total(_copied(long))
    assert sums.measured == 80 + 120
