"""Reading a request body without ever holding more than the limit in memory."""

from __future__ import annotations

from fastapi import Request

from nexus.api.errors import ApiError


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the body exceeds the limit of {limit} bytes")


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body, or 413 as soon as it is known to be over `limit` bytes.

    A declared Content-Length over the limit is refused before a byte is read; a chunked
    body is counted as it arrives and abandoned at the limit.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise _too_large(limit)
        except ValueError as error:
            raise ApiError(400, "malformed_request", "Content-Length is not a number") from error
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
