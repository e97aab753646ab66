"""What an HTTP answer means for a send: sent, retry later (and when), or refused for good."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, SendResult, Sent

# Long enough for a slow platform, well inside the delivery lease (60 s by default), so a
# live sender always reports before another worker may look at its chunk.
DEFAULT_TIMEOUT_S = 20.0
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def new_client(timeout_s: float = DEFAULT_TIMEOUT_S) -> httpx.Client:
    return httpx.Client(timeout=timeout_s, headers={"User-Agent": "nexus-broker"})


class ApiSender:
    """A sender that calls a platform's HTTP API with one token. `send` refuses while the
    token is not set and turns a transport error into a retry; `_send` does the call."""

    name: str
    configured_by: str  # the environment variable that sets the token

    def __init__(self, token: str | None, api_base: str, client: httpx.Client | None = None):
        self._token = token
        self._base = api_base.rstrip("/")
        self._client = client or new_client()

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        return False  # unless the platform takes a key, a resend may post twice

    def send(self, delivery: DeliveryRecord) -> SendResult:
        if not self._token:
            return Refused(f"{self.configured_by} is not set")
        try:
            return self._send(delivery, self._token)
        except httpx.HTTPError as error:
            return transport_failure(error)

    def _send(self, delivery: DeliveryRecord, token: str) -> SendResult:
        raise NotImplementedError


def retry_after_ms(response: httpx.Response, body: Any = None) -> int | None:
    """The platform's wait: a JSON `retry_after` (Telegram's parameters, Discord's body) or
    the Retry-After header (seconds or an HTTP date)."""
    if isinstance(body, dict):
        for holder in (body.get("parameters"), body):
            value = holder.get("retry_after") if isinstance(holder, dict) else None
            if isinstance(value, int | float) and value >= 0:
                return int(value * 1000)
    header = response.headers.get("retry-after")
    if header is None:
        return None
    try:
        return int(float(header) * 1000)
    except ValueError:
        try:
            when = parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        from datetime import UTC, datetime

        return max(0, int((when - datetime.now(UTC)).total_seconds() * 1000))


def json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def classify(response: httpx.Response, *, message_id: Callable[[Any], str | None]) -> SendResult:
    """2xx → sent (with the platform's id for the message); 429, 408 and 5xx → retry;
    401, 403 and other 4xx → refused (sending the same request again cannot succeed)."""
    body = json_or_none(response)
    if response.is_success:
        return Sent(message_id(body))
    detail = f"HTTP {response.status_code}: {_describe(body, response)}"
    if response.status_code in _RETRYABLE_STATUS:
        return RetryLater(detail, retry_after_ms(response, body))
    return Refused(detail)


def id_at(*path: str | int) -> Callable[[Any], str | None]:
    """A reader of the sent message's id at `path` in the platform's JSON answer (object
    keys and list indexes); it reads None where the answer holds nothing there."""

    def read(body: Any) -> str | None:
        found = body
        for step in path:
            if isinstance(step, int):
                found = found[step] if isinstance(found, list) and len(found) > step else None
            else:
                found = found.get(step) if isinstance(found, dict) else None
        return str(found) if found is not None else None

    return read


def transport_failure(error: httpx.HTTPError) -> SendResult:
    """No answer at all (refused connection, timeout): the platform may try again later."""
    return RetryLater(f"{type(error).__name__}: {error}")


def short_hash(value: str, length: int = 25) -> str:
    """A stable token of `length` hex digits (Discord nonces are at most 25 characters)."""
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def _describe(body: Any, response: httpx.Response) -> str:
    if isinstance(body, dict):
        for key in ("description", "error", "message"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if value:
                return str(value)[:300]
    return response.text[:300] or response.reason_phrase
