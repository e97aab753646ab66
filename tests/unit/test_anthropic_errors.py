"""The pure mapping from Anthropic SDK failures and error events to ModelError kinds."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from nexus.adapters.anthropic.errors import classify, to_model_error

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")


def _status_error(status: int, error_type: str | None, message: str) -> anthropic.APIStatusError:
    body: Any = {"type": "error", "error": {"type": error_type, "message": message}}
    if error_type is None:
        body = message  # what the SDK keeps when the body is not JSON
    response = httpx2.Response(status, request=REQUEST)
    return anthropic.APIStatusError(f"Error code: {status}", response=response, body=body)


@pytest.mark.parametrize(
    ("status", "error_type", "message", "kind", "retryable"),
    [
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         "context_overflow", False),
        (400, "invalid_request_error",
         "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000",
         "context_overflow", False),
        (400, "invalid_request_error", "tool_result without tool_use", "unknown", False),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes",
         "context_overflow", False),
        (401, "authentication_error", "invalid x-api-key", "auth_failure", False),
        (403, "permission_error", "no access to this model", "auth_failure", False),
        (429, "rate_limit_error", "slow down", "rate_limit", True),
        (500, "api_error", "Internal server error", "model_error", True),
        (529, "overloaded_error", "Overloaded", "model_error", True),
        (504, "timeout_error", "Request timed out", "timeout", True),
        (402, "billing_error", "credit balance too low", "unknown", False),
        (404, "not_found_error", "model: claude-x", "unknown", False),
        (502, None, "<html>bad gateway</html>", "model_error", True),
        (401, None, "unauthorized", "auth_failure", False),
    ],
)  # fmt: skip
def test_http_errors(
    status: int, error_type: str | None, message: str, kind: str, retryable: bool
) -> None:
    error = to_model_error(_status_error(status, error_type, message))
    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, status)


def test_the_api_message_is_kept_verbatim() -> None:
    error = to_model_error(_status_error(429, "rate_limit_error", "would exceed 20,000,000 bytes"))
    assert error.message == "would exceed 20,000,000 bytes"


def test_a_timeout_and_a_lost_connection_are_retryable() -> None:
    timeout = to_model_error(anthropic.APITimeoutError(request=REQUEST))
    lost = to_model_error(anthropic.APIConnectionError(request=REQUEST))
    assert (timeout.kind, timeout.retryable) == ("timeout", True)
    assert (lost.kind, lost.retryable) == ("model_error", True)


def test_transport_errors_escaping_a_stream_are_mapped() -> None:
    # The SDK wraps transport errors only before the response; mid-stream they escape raw.
    stalled = to_model_error(httpx2.ReadTimeout("timed out", request=REQUEST))
    dropped = to_model_error(httpx2.RemoteProtocolError("peer closed", request=REQUEST))
    assert (stalled.kind, stalled.retryable) == ("timeout", True)
    assert (dropped.kind, dropped.retryable) == ("model_error", True)


def test_a_mid_stream_error_event_on_a_200_response() -> None:
    response = httpx2.Response(200, request=REQUEST)
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    raised = anthropic.APIStatusError(str(body), response=response, body=body)
    error = to_model_error(raised)
    assert (error.kind, error.retryable, error.status_code) == ("model_error", True, None)


@pytest.mark.parametrize(
    ("error_type", "kind", "retryable"),
    [
        ("api_error", "model_error", True),
        ("rate_limit_error", "rate_limit", True),
        (None, "unknown", False),
    ],
)
def test_error_types_without_a_status(error_type: str | None, kind: str, retryable: bool) -> None:
    error = classify(error_type, "the stream reported an error", None)
    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, None)


def test_anything_else_is_unknown_and_not_retried() -> None:
    error = to_model_error(ValueError("odd"))
    assert (error.kind, error.retryable) == ("unknown", False)
    assert "ValueError" in error.message
    assert classify(None, "no idea", None).kind == "unknown"
