"""Reading a downloaded file's body within the attachment limits: no larger than
NEXUS_ATTACHMENT_MAX_BYTES, no slower than the fetch timeout in all."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from nexus.engine.attachments import Fetched


def too_big(max_bytes: int) -> str:
    """Why a file over the limit is not fetched."""
    return f"it is larger than NEXUS_ATTACHMENT_MAX_BYTES ({max_bytes} bytes)"


def read_capped(
    response: httpx.Response,
    *,
    max_bytes: int,
    timeout_s: float,
    late: str,
    refuse: Callable[[str, bool], Exception],
) -> Fetched:
    """The streamed `response`'s body and media type. Over `max_bytes` (as declared, or as
    it arrives) or slower than `timeout_s` (then `late` is the reason), `refuse(reason,
    permanent)` is raised: only a file too big stays too big on a second try."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise refuse(too_big(max_bytes), True)
    data = bytearray()
    # httpx times each read; a server that trickles bytes is stopped by this.
    deadline = time.monotonic() + timeout_s
    for chunk in response.iter_bytes():
        data.extend(chunk)
        if len(data) > max_bytes:  # a length that lied, or none given
            raise refuse(too_big(max_bytes), True)
        if time.monotonic() > deadline:
            raise refuse(late, False)
    mime = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return Fetched(bytes(data), mime or None)
