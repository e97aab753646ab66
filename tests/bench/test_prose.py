"""The storage benchmark's messages: the same on every call, of the sizes it says, and as
varied as prose (a compressor finds English-like repetition, not one string over again)."""

from __future__ import annotations

import zlib

from bench import prose


def test_a_turns_messages_are_the_same_whenever_they_are_made() -> None:
    later = [prose.exchange(n) for n in (7, 3, 7)]
    assert later[0] == later[2] == prose.exchange(7)
    assert later[1] != later[0]
    assert prose.exchange(7, seed=1) != prose.exchange(7)


def test_messages_are_ascii_and_within_their_sizes() -> None:
    pairs = [prose.exchange(n) for n in range(300)]
    for said, answer in pairs:
        assert said.isascii() and answer.isascii()
        assert prose.USER_BYTES[0] <= len(said) <= prose.USER_BYTES[1]
        assert prose.ASSISTANT_BYTES[0] <= len(answer) <= prose.ASSISTANT_BYTES[1]
    # Spread over each range, not piled at one end of it.
    saids, answers = sorted(len(s) for s, _ in pairs), sorted(len(a) for _, a in pairs)
    assert saids[30] < 220 < saids[-30] and answers[30] < 600 < answers[-30]


def test_prose_compresses_as_prose_does_and_the_short_pair_far_more() -> None:
    def ratio(pairs: list[tuple[str, str]]) -> float:
        raw = "\n".join(m for pair in pairs for m in pair).encode()
        return len(raw) / len(zlib.compress(raw, 6))

    # zlib (with entropy coding) finds more than pglz: this project's docs 2.9x, GPL-3 2.9x.
    assert 2.4 < ratio([prose.exchange(n) for n in range(200)]) < 3.6
    assert ratio([prose.short(n) for n in range(200)]) > 5.0
