"""The `http_fetch` tool: GET a URL, optionally sending a credential as a bearer token.

It reaches the public internet only (and what the persona's `permissions.network` allows),
never the deployment itself, and sends a credential only to the destinations it declares.
The host is resolved once, every address checked, and the request connects to the checked
address (the Host header and TLS server name stay the URL's own): a name that answers a
public address to the check and a private one to the connection cannot slip through.
Redirects are not followed: the model sees the status and `location`, and fetching that
is a new call, checked like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
import structlog

from nexus.adapters.pinned_fetch import (
    FetchRefused,
    as_addresses,
    host_and_port,
    parse_url,
    pinned_stream,
    system_resolve,
)
from nexus.engine.addresses import IPAddress, OwnAddress, address_refusal
from nexus.engine.destinations import Destination, credential_refusal
from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure

MAX_BODY_CHARS = 32_000  # what the model is shown of a response
_MAX_BODY_BYTES = 4 * MAX_BODY_CHARS  # read at most this much, however large the response

# host, port → the addresses it resolves to (as text), in the resolver's order.
Resolver = Callable[[str, int], Sequence[str]]
# A security event's kind (credential_refused, address_refused): counted where it is seen.
SecurityCounter = Callable[[str], None]

log = structlog.get_logger(__name__)


def resolve_host(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (an address resolves to itself)."""
    try:
        return system_resolve(host, port)
    except (OSError, UnicodeError) as error:
        raise ToolFailure(f"cannot resolve {host[:200]}: {error}") from None


def http_fetch_tool(
    *,
    timeout_s: float = 10.0,
    own: Sequence[OwnAddress] = (),
    resolve: Resolver = resolve_host,
    count: SecurityCounter | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Tool:
    """The tool. `own`: the deployment's addresses, refused whatever a persona allows;
    `count`: where refusals are counted (besides the log); `resolve` and `transport` are
    the resolver and the connection layer (tests pass recording ones)."""

    def refuse(kind: str, reason: str, context: ToolContext, **fields: Any) -> ToolFailure:
        # The reason names hosts and credential ids, never a secret.
        log.warning(
            f"security.{kind}",
            reason=reason,
            persona_id=context.persona_id,
            session_id=context.session_id,
            turn_id=context.turn_id,
            **fields,
        )
        if count is not None:
            count(kind)
        return ToolFailure(f"http_fetch refused: {reason}")

    def run(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        url = _parsed(str(arguments["url"]))
        host, port = host_and_port(url)
        credential = arguments.get("credential")
        headers = {"accept": "application/json, text/*;q=0.9"}
        if credential:
            destination = Destination(url.scheme, host.lower(), port, url.path)
            refusal = credential_refusal(
                credential, context.credentials.hosts(credential), destination
            )
            if refusal is not None:
                raise refuse(
                    "credential_refused", refusal, context, credential=credential, host=host
                )
            headers["authorization"] = f"Bearer {context.credentials[credential]}"
        addresses = _addresses(resolve(host, port))
        refusal = address_refusal(host, port, addresses, context.network, own)
        if refusal is not None:
            raise refuse("address_refused", refusal, context, host=host, port=port)
        try:
            with (
                httpx.Client(
                    timeout=timeout_s, follow_redirects=False, trust_env=False, transport=transport
                ) as client,
                pinned_stream(client, url, addresses[0], headers) as response,
            ):
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > _MAX_BODY_BYTES:
                        break
        except httpx.HTTPError as error:
            raise ToolFailure(
                f"GET {str(url)[:200]} failed: {type(error).__name__}: {error}"
            ) from None
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
            "GET a public URL and return its status and (the start of) its body. Give "
            "`credential` to send that credential as a bearer token; you never see the token "
            "itself, and it goes only to the hosts it was issued for."
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


def _parsed(text: str) -> httpx.URL:
    """The URL as httpx reads it (the check and the request read it alike), or ToolFailure."""
    try:
        return parse_url(text)
    except FetchRefused as error:
        raise ToolFailure(error.reason) from None


def _addresses(found: Sequence[str]) -> list[IPAddress]:
    try:
        return as_addresses(found)
    except FetchRefused as error:
        raise ToolFailure(error.reason) from None
