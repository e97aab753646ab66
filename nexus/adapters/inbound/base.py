"""The inbound adapter port: a request's raw bytes in, events (or a refusal) out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nexus.event import NexusEvent


@dataclass(frozen=True)
class InboundRequest:
    """An HTTP request as the platform sent it; signatures are checked on `body` as is."""

    method: str
    url: str
    headers: Mapping[str, str]  # keys lower-cased
    body: bytes
    query: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Rejected(Exception):
    """The request is refused; nothing is stored. `status` is the HTTP answer."""

    status = 400

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SignatureRejected(Rejected):
    """Missing, wrong or stale signature, or no secret configured: 401."""

    status = 401


class MalformedRequest(Rejected):
    """The body is not what the platform sends: 400."""

    status = 400


@dataclass(frozen=True)
class ImmediateAnswer:
    """A body the platform expects straight back (a challenge, a PONG)."""

    body: Any
    media_type: str = "application/json"


@dataclass(frozen=True)
class InboundOutcome:
    events: tuple[NexusEvent, ...] = ()
    answer: ImmediateAnswer | None = None


class InboundAdapter(Protocol):
    """One platform's webhook: verify first, then parse. Both are pure (no I/O)."""

    name: str

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        """Raise SignatureRejected unless the request is authentically the platform's."""

    def parse(self, request: InboundRequest) -> InboundOutcome:
        """Turn a verified request into events; raise MalformedRequest on bad input."""


def json_body(request: InboundRequest) -> dict[str, Any]:
    """The body as a JSON object of bounded depth, or a MalformedRequest saying what is wrong."""
    from nexus.adapters.inbound.bounds import load_json_object

    return load_json_object(request.body)
