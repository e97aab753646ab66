"""Bounded parsing for signed but hostile bodies: JSON depth, numbers, ids, and a guard."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from pydantic import ValidationError

from nexus.adapters.inbound.base import (
    InboundAdapter,
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
)
from nexus.event import NexusEvent

# Real platform payloads nest about ten deep (WhatsApp's is the deepest, ~8); 64 leaves room
# for any of them and keeps Postgres's JSONB parser (and our own walks) far from its stack.
MAX_JSON_DEPTH = 64
# The ledger's key column is VARCHAR(255).
MAX_ID_CHARS = 255


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Postgres JSONB has no infinity
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads would take NaN and Infinity


def _depth(value: Any) -> int:
    """How deep `value` nests, walked without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        node, level = pending.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            children = node.values() if isinstance(node, dict) else node
            pending.extend((child, level + 1) for child in children)
    return deepest


def load_json(data: bytes | str, what: str = "body") -> Any:
    """Strict JSON with bounded depth, or a MalformedRequest that says what is wrong."""
    try:
        parsed = json.loads(data, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError as error:
        raise MalformedRequest(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from error
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, 4300-digit ints
        raise MalformedRequest(f"{what} is not valid JSON: {error}") from error
    if _depth(parsed) > MAX_JSON_DEPTH:
        raise MalformedRequest(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    return parsed


def load_json_object(data: bytes | str, what: str = "body") -> dict[str, Any]:
    parsed = load_json(data, what)
    if not isinstance(parsed, dict):
        raise MalformedRequest(f"{what} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def event_id(prefix: str, provider_id: str) -> str:
    """`prefix + provider_id`, or, when that would not fit the ledger's key, the prefix and
    a SHA-256 of the provider's id: a redelivery still lands on the same key."""
    whole = f"{prefix}{provider_id}"
    if len(whole) <= MAX_ID_CHARS:
        return whole
    digest = hashlib.sha256(provider_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix[: MAX_ID_CHARS - 71]}sha256:{digest}"


class Guarded:
    """An adapter whose parse answers 400 for a field of the wrong type or size, where the
    adapter itself would raise: a signed body the platform sent oddly is its mistake, and
    a 5xx would only make it retry the same bytes forever."""

    def __init__(self, inner: InboundAdapter) -> None:
        self.inner = inner
        self.name = inner.name

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        self.inner.verify(request, now_ms=now_ms)

    def parse(self, request: InboundRequest) -> InboundOutcome:
        try:
            outcome = self.inner.parse(request)
            # `model_copy(update=...)` does not validate: check each event as it will be stored.
            events = tuple(NexusEvent.model_validate(dict(event)) for event in outcome.events)
            return InboundOutcome(events=events, answer=outcome.answer)
        except ValidationError as error:
            fields = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
                for e in error.errors()[:3]
            )
            raise MalformedRequest(f"a field cannot be stored ({fields})") from error
        except RecursionError as error:
            raise MalformedRequest("the body nests too deeply to read") from error
        except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as error:
            raise MalformedRequest(
                f"the body has a field of an unexpected type or size: {type(error).__name__}: "
                f"{str(error)[:200]}"
            ) from error


def unix_ms(seconds: Any) -> int:
    """A platform's Unix-seconds date (an int or a digit string) as ms; 0 (unknown) for
    anything else: a date we cannot read is no reason to refuse the message."""
    if isinstance(seconds, str) and seconds.isascii() and seconds.isdigit() and len(seconds) < 16:
        return int(seconds) * 1000
    if isinstance(seconds, int) and not isinstance(seconds, bool) and 0 <= seconds < 10**15:
        return seconds * 1000
    return 0
