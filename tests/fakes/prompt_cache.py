"""The fake Messages API's prompt cache: which prefixes it has seen, and what a request reads.

A request is a sequence of blocks in the API's cache order: tools, then system blocks, then
each message's content blocks. A block with `cache_control` is a breakpoint: the prefix up
to and including it is written to the cache. A breakpoint reads the longest prefix seen
before that ends at it or at one of the 20 blocks before it (the API's lookback). Tokens are
estimated as characters / 4 of the prefix's canonical JSON; the API also has a minimum
cacheable length, which this fake leaves out so small tests can see the cache work.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

LOOKBACK_BLOCKS = 20


@dataclass(frozen=True)
class CacheAccount:
    """What one request cost: uncached input, read from the cache, written to it."""

    input_tokens: int
    cache_read: int
    cache_write: int


def _canonical(piece: Any) -> str:
    if isinstance(piece, dict):
        piece = {k: v for k, v in piece.items() if k != "cache_control"}
    return json.dumps(piece, sort_keys=True, ensure_ascii=False)


def blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(canonical text, is a breakpoint) per block, in the API's cache order."""
    out: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        out.append(("tool:" + _canonical(tool), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(("system:" + system, False))
    elif isinstance(system, list):
        out.extend(("system:" + _canonical(b), "cache_control" in b) for b in system)
    for message in body.get("messages") or []:
        role = str(message.get("role"))
        content = message.get("content")
        if isinstance(content, str):
            out.append((f"{role}:" + _canonical({"type": "text", "text": content}), False))
            continue
        for block in content or []:
            out.append((f"{role}:" + _canonical(block), "cache_control" in block))
    return out


class PromptCache:
    """Every prefix written so far (by hash), for one fake server."""

    def __init__(self) -> None:
        self._written: set[str] = set()
        self._lock = threading.Lock()

    def account(self, body: dict[str, Any], *, write: bool = True) -> CacheAccount:
        """Account for `body` and (if `write`) write its breakpoints' prefixes."""
        pieces = blocks(body)
        hashes: list[str] = []
        chars: list[int] = []  # characters up to and including each block
        digest = hashlib.sha256(str(body.get("model", "")).encode())
        total = 0
        for text, _ in pieces:
            digest.update(text.encode())
            hashes.append(digest.copy().hexdigest())
            total += len(text)
            chars.append(total)
        marks = [index for index, (_, marked) in enumerate(pieces) if marked]
        if not marks:
            return CacheAccount(input_tokens=total // 4, cache_read=0, cache_write=0)
        with self._lock:
            read_to = -1  # the last block of the longest prefix read
            for mark in marks:
                for index in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                    if hashes[index] in self._written:
                        read_to = max(read_to, index)
                        break
            if write:
                self._written.update(hashes[mark] for mark in marks)
        read = chars[read_to] // 4 if read_to >= 0 else 0
        cached = chars[marks[-1]] // 4
        return CacheAccount(
            input_tokens=total // 4 - cached, cache_read=read, cache_write=max(0, cached - read)
        )
