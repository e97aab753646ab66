"""Chunking: platform limits, which break wins, fences closed and reopened, nothing lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nexus.outbound.chunking import MIN_LIMIT, PLATFORM_LIMITS, chunk, limit_for

FENCE = re.compile(r"^[ \t]*```.*$", re.MULTILINE)


def _fence_count(text: str) -> int:
    return len(FENCE.findall(text))


def _content(text: str) -> str:
    """The non-whitespace characters, fence lines (ours or the original's) left out."""
    return "".join(FENCE.sub("", text).split())


def _assert_well_formed(pieces: list[str], original: str, limit: int) -> None:
    for piece in pieces:
        assert 0 < len(piece) <= limit
        lines = piece.split("\n")
        assert lines[0].strip() and lines[-1].strip(), f"blank edge line in {piece!r}"
        assert _fence_count(piece) % 2 == 0, f"unbalanced fence in {piece!r}"
    assert "".join(_content(piece) for piece in pieces) == _content(original)


def test_platform_limits() -> None:
    assert PLATFORM_LIMITS == {
        "telegram": 4096,
        "slack": 4000,
        "discord": 2000,
        "whatsapp": 4096,
        "sms": 1600,
        "imessage": 2000,
    }
    assert limit_for("discord") == 2000
    assert limit_for("email") is None
    assert limit_for("webhook") is None


def test_text_that_fits_is_one_chunk() -> None:
    assert chunk("hello world", 40) == ["hello world"]
    assert chunk("x" * 40, 40) == ["x" * 40]
    assert chunk("word " * 5000, None) == [("word " * 5000).rstrip()]


def test_blank_edges_are_dropped_but_indentation_kept() -> None:
    assert chunk("\n\n  \nhello  \n\n", 40) == ["hello"]
    assert chunk("\n    indented code\n", 40) == ["    indented code"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n", " \t\n \n"])
def test_nothing_to_send_is_no_chunks(text: str) -> None:
    assert chunk(text, 40) == []
    assert chunk(text, None) == []


def test_a_limit_too_small_for_a_fence_is_refused() -> None:
    with pytest.raises(ValueError, match="below the minimum"):
        chunk("hello", MIN_LIMIT - 1)
    assert chunk("hello", MIN_LIMIT) == ["hello"]


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param(
            "One two.\n\nThree four five. Six seven eight nine ten eleven.",
            40,
            ["One two.", "Three four five.", "Six seven eight nine ten eleven."],
            id="paragraph-beats-a-later-sentence-end",
        ),
        pytest.param(
            "Aa.\n\nBb bb.\n\nCc cc cc. Dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd",
            60,
            ["Aa.\n\nBb bb.", "Cc cc cc. Dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd dd"],
            id="latest-paragraph-that-fits",
        ),
        pytest.param(
            "Alpha beta\nGamma delta. Epsilon zeta eta theta iota",
            40,
            ["Alpha beta", "Gamma delta. Epsilon zeta eta theta iota"],
            id="line-beats-a-later-sentence-end",
        ),
        pytest.param(
            "Alpha beta gamma. Delta epsilon zeta eta theta iota kappa",
            40,
            ["Alpha beta gamma.", "Delta epsilon zeta eta theta iota kappa"],
            id="sentence-beats-a-later-space",
        ),
        pytest.param(
            'He said "stop." Then left and went away from here, far away.',
            40,
            ['He said "stop."', "Then left and went away from here, far", "away."],
            id="sentence-end-after-a-closing-quote",
        ),
        pytest.param(
            "Supercalifragilistic expialidocious is a long word indeed",
            40,
            ["Supercalifragilistic expialidocious is a", "long word indeed"],
            id="space-exactly-at-the-limit",
        ),
        pytest.param("x" * 100, 40, ["x" * 40, "x" * 40, "x" * 20], id="hard-cut"),
    ],
)
def test_break_preference(text: str, limit: int, expected: list[str]) -> None:
    assert chunk(text, limit) == expected


def test_a_cut_fence_is_closed_and_reopened_with_its_info_string() -> None:
    text = (
        "Here is the fix:\n\n```python\ndef add(a, b):\n    return a + b\n\n\n"
        "def sub(a, b):\n    return a - b\n```\n\nThat is all."
    )
    assert chunk(text, 60) == [
        "Here is the fix:",
        "```python\ndef add(a, b):\n    return a + b\n```",
        "```python\ndef sub(a, b):\n    return a - b\n```\n\nThat is all.",
    ]


def test_a_fence_cut_mid_line_counts_its_closing_line_against_the_limit() -> None:
    text = "Run this:\n```sh\nmake build && make test && make deploy-production\n```"
    pieces = chunk(text, 40)
    assert pieces == [
        "Run this:",
        "```sh\nmake build && make test &&\n```",
        "```sh\nmake deploy-production\n```",
    ]
    _assert_well_formed(pieces, text, 40)


def test_a_closing_fence_that_lands_first_is_not_repeated_as_an_empty_block() -> None:
    # The blank line before the closing fence is the best break: the first chunk closes the
    # block itself, so the next does not start with an empty reopened one.
    text = "```\n" + "a" * 20 + "\n\n```\n" + "b" * 20
    assert chunk(text, 40) == ["```\n" + "a" * 20 + "\n```", "b" * 20]


def test_a_hard_cut_never_splits_a_fence_line() -> None:
    text = "```\n" + "a" * 30 + "\n```\nafter"
    assert chunk(text, 36) == ["```\n" + "a" * 28 + "\n```", "```\naa\n```\nafter"]


def test_an_unterminated_fence_is_closed() -> None:
    assert chunk("text\n```python\nx = 1", None) == ["text\n```python\nx = 1\n```"]


def _long_reply() -> str:
    paragraph = " ".join(["The broker keeps every turn in its ledger."] * 7)
    before = "\n\n".join([paragraph] * 11)
    functions = [
        f"def handler_{n}(event):\n    value = compute(event, {n})\n    return value * {n}\n"
        for n in range(20)
    ]
    code = "```python\n" + "\n".join(functions) + "```"
    after = "\n\n".join([paragraph] * 18)
    return f"{before}\n\n{code}\n\n{after}"[:9000]


def test_a_long_reply_with_code_across_the_telegram_limit() -> None:
    reply = _long_reply()
    opening = reply.index("```python")
    closing = reply.index("\n```", opening) + 1
    assert len(reply) == 9000
    assert opening < 4096 < closing and 1400 < closing - opening < 1600

    pieces = chunk(reply, limit_for("telegram"))

    assert len(pieces) == 3
    _assert_well_formed(pieces, reply, 4096)
    assert pieces[0].endswith("\n```")  # closed where the cut fell inside the code
    assert pieces[1].startswith("```python\ndef handler_")


_WORD = st.text(alphabet="abcdefgh", min_size=1, max_size=10) | st.builds(
    str.__mul__, st.sampled_from("xyz"), st.integers(min_value=30, max_value=70)
)  # some words longer than the smallest limits, to force hard cuts
_SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(_WORD, min_size=1, max_size=10),
    st.sampled_from(["", ".", "!", "?", '."', ","]),
)
_PARAGRAPH = st.lists(
    st.lists(_SENTENCE, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=3
).map("\n".join)
_CODE_LINE = st.text(alphabet="abc =():.\t", max_size=40)
_FENCED = st.builds(
    lambda info, lines: f"```{info}\n" + "\n".join(lines) + "\n```",
    st.sampled_from(["", "python", "js", "c++ title=x"]),
    st.lists(_CODE_LINE, max_size=8),
)
_SEPARATOR = st.sampled_from(["\n", "\n\n", "\n\n\n", "\n \n", "  \n\n"])


@st.composite
def _replies(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(_PARAGRAPH | _FENCED, min_size=1, max_size=6))
    text = blocks[0]
    for block in blocks[1:]:
        text += draw(_SEPARATOR) + block
    return text


@settings(max_examples=200, deadline=None)
@given(text=_replies(), limit=st.integers(min_value=40, max_value=300))
def test_chunks_fit_balance_fences_and_lose_nothing(text: str, limit: int) -> None:
    _assert_well_formed(chunk(text, limit), text, limit)


# Backticks in any arrangement, short of a run as long as a chunk (which no cut can keep
# from looking like a fence line).
_BACKTICKY = (
    st.lists(st.sampled_from([*"ab .!\n\t`", "```", "```py\n", "```python title=x\n", "\n\n"]))
    .map("".join)
    .filter(lambda text: "`" * 10 not in text)
)


def _fence_lines_fit(text: str, limit: int) -> bool:
    """Every fence line, with the closing fence a cut adds after it, fits in one chunk."""
    return all(
        len(line) + 1 + len(line) - len(line.lstrip("`")) <= limit
        for line in (match.group(0).strip() for match in FENCE.finditer(text))
    )


@settings(max_examples=300, deadline=None)
@given(text=_BACKTICKY, limit=st.integers(min_value=MIN_LIMIT, max_value=120))
def test_any_backticks_and_breaks_still_fit_balance_and_lose_nothing(text: str, limit: int) -> None:
    assume(_fence_lines_fit(text, limit))  # longer ones: the test below
    _assert_well_formed(chunk(text, limit), text, limit)


def test_a_fence_line_too_long_for_a_chunk_is_cut_and_loses_nothing() -> None:
    # Its info string cannot stay on the line once the closing fence needs the room, so the
    # rest goes on in the next chunk (as code): every character still arrives.
    text = "```````a```python title=x\n"
    pieces = chunk(text, 32)
    assert all(0 < len(piece) <= 32 and _fence_count(piece) % 2 == 0 for piece in pieces)
    shown = "".join("".join(piece.split()) for piece in pieces)
    for character in "".join(text.split()):
        assert shown.count(character) >= text.count(character)
