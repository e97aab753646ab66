"""Bounded parsing: JSON depth and numbers, ids that fit the ledger's key, readable dates,
and the guard that turns an adapter's surprise at a field into a 400."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from nexus.adapters.inbound.base import InboundOutcome, InboundRequest, MalformedRequest
from nexus.adapters.inbound.bounds import (
    MAX_JSON_DEPTH,
    Guarded,
    event_id,
    load_json,
    load_json_object,
    unix_ms,
)
from nexus.adapters.inbound.telegram import TelegramAdapter
from nexus.adapters.inbound.whatsapp import WhatsAppAdapter
from nexus.event import NexusEvent


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_at_the_depth_bound_parses_and_one_deeper_is_refused() -> None:
    assert load_json(_nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(MalformedRequest, match=f"deeper than {MAX_JSON_DEPTH}"):
        load_json(_nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(MalformedRequest, match="deeper"):  # past Python's own recursion limit
        load_json(b'{"a": ' + _nested(200_000) + b"}")


@pytest.mark.parametrize(
    "body",
    [b"NaN", b'{"x": Infinity}', b'{"x": -Infinity}', b'{"x": 1e400}', b"9" * 5_000, b"{"],
    ids=["NaN", "Infinity", "-Infinity", "overflowing float", "5000 digits", "truncated"],
)
def test_json_postgres_cannot_hold_is_refused(body: bytes) -> None:
    with pytest.raises(MalformedRequest, match=r"not valid JSON|out of range"):
        load_json(body)


def test_an_object_is_required_where_one_is_expected() -> None:
    assert load_json_object(b'{"a": [1.5, 2]}') == {"a": [1.5, 2]}
    with pytest.raises(MalformedRequest, match="must be a JSON object, got list"):
        load_json_object(b"[1]")


def test_a_long_provider_id_is_hashed_to_fit_and_stays_deterministic() -> None:
    assert event_id("telegram:", "42") == "telegram:42"
    long = event_id("email:", "m" * 998)
    assert len(long) <= 255 and long.startswith("email:sha256:")
    assert long == event_id("email:", "m" * 998) != event_id("email:", "m" * 997 + "n")
    assert len(event_id("p" * 400, "x" * 400)) == 255
    assert len(event_id("surrogate:", "\ud800" * 300)) <= 255


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (1_767_225_600, 1_767_225_600_000),
        ("1767225600", 1_767_225_600_000),
        (True, 0),
        ("yesterday", 0),
        ("\u0663\u0664", 0),
        (-5, 0),
        (10**40, 0),
        ("9" * 5_000, 0),
        (1.5, 0),
        (None, 0),
    ],
)
def test_unix_seconds_are_read_or_unknown(given: object, expected: int) -> None:
    assert unix_ms(given) == expected


class _Surprised:
    """An adapter that trips over a field of a type it did not expect."""

    name = "surprised"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        return None

    def parse(self, request: InboundRequest) -> InboundOutcome:
        raise self.error


def _request(body: bytes) -> InboundRequest:
    return InboundRequest("POST", "https://x", {}, body)


@pytest.mark.parametrize(
    "error", [TypeError("unhashable"), ValueError("bad"), OverflowError("huge"), KeyError("k")]
)
def test_the_guard_turns_a_surprise_into_a_clear_400(error: Exception) -> None:
    with pytest.raises(MalformedRequest, match=type(error).__name__):
        Guarded(_Surprised(error)).parse(_request(b"{}"))


def test_the_guard_names_the_field_that_cannot_be_stored() -> None:
    with pytest.raises(ValidationError) as caught:
        NexusEvent.model_validate({"id": "x:1", "adapter": "x", "platform": "x", "text": 5})
    with pytest.raises(MalformedRequest, match="text: Input should be a valid string"):
        Guarded(_Surprised(caught.value)).parse(_request(b"{}"))


def test_telegram_refuses_update_id_true_and_reads_odd_dates_as_unknown() -> None:
    adapter = Guarded(TelegramAdapter("s"))
    with pytest.raises(MalformedRequest, match="integer update_id"):
        adapter.parse(_request(json.dumps({"update_id": True}).encode()))
    message = {"chat": {"id": 1, "type": "private"}, "text": "hi", "date": "soon"}
    (event,) = adapter.parse(
        _request(json.dumps({"update_id": 1, "message": message}).encode())
    ).events
    assert event.occurred_at == 0 and event.routable
    huge = json.dumps({"update_id": 10**300, "message": message}).encode()
    (hashed,) = adapter.parse(_request(huge)).events
    assert hashed.id.startswith("telegram:sha256:") and len(hashed.id) <= 255


def test_a_field_an_adapter_copied_in_unchecked_is_checked_by_the_guard() -> None:
    # WhatsApp's text body as a number: model_copy(update=...) let it through unvalidated.
    message = {"from": "4915", "id": "wamid.A", "type": "text", "text": {"body": 0}}
    notification = {
        "object": "whatsapp_business_account",
        "entry": [{"changes": [{"value": {"messages": [message]}}]}],
    }
    with pytest.raises(MalformedRequest, match="text: Input should be a valid string"):
        Guarded(WhatsAppAdapter("s", "v")).parse(_request(json.dumps(notification).encode()))
