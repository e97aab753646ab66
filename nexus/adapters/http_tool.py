"""The `http_fetch` tool: GET a URL, optionally sending a credential as a bearer token."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure

MAX_BODY_CHARS = 32_000  # what the model is shown of a response
_MAX_BODY_BYTES = 4 * MAX_BODY_CHARS  # read at most this much, however large the response


def http_fetch_tool(*, timeout_s: float = 10.0) -> Tool:
    def run(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        url = str(arguments["url"])
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
            raise ToolFailure(f"url must be an absolute http:// or https:// URL, not {url[:200]!r}")
        headers = {"accept": "application/json, text/*;q=0.9"}
        credential = arguments.get("credential")
        if credential:
            headers["authorization"] = f"Bearer {context.credentials[credential]}"
        try:
            # No redirects: a redirect to another host must not carry the token along.
            with (
                httpx.Client(timeout=timeout_s, follow_redirects=False) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > _MAX_BODY_BYTES:
                        break
        except httpx.HTTPError as error:
            raise ToolFailure(f"GET {url[:200]} failed: {type(error).__name__}: {error}") from None
        text = body.decode(response.encoding or "utf-8", errors="replace")
        answer: dict[str, Any] = {
            "status": response.status_code,
            "content_type": response.headers.get("content-type", ""),
            "body": text[:MAX_BODY_CHARS],
            "truncated": len(text) > MAX_BODY_CHARS or len(body) > _MAX_BODY_BYTES,
        }
        if response.is_redirect:
            answer["location"] = response.headers.get("location", "")
        return answer

    spec = ToolSpec(
        name="http_fetch",
        description=(
            "GET a URL and return its status and (the start of) its body. Give `credential` "
            "to send that credential as a bearer token; you never see the token itself."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "an absolute http(s) URL"},
                "credential": {
                    "type": "string",
                    "description": "the id of a credential to send as Authorization: Bearer",
                },
            },
            "required": ["url"],
        },
    )
    return Tool(spec=spec, run=run, credential_argument="credential")
