"""The Gmail API over httpx, for one mailbox: OAuth access tokens from its refresh token,
history, messages, the watch, and sending.

The OAuth client and refresh token are a credential (NEXUS_GMAIL_CREDENTIAL names its id:
NEXUS_CREDENTIAL_<ID>, or the secrets file), read when a token is needed, never at start.
Like every credential it declares where it may be sent: the token endpoint gets the
refresh token and the API the access token only if their URLs are among the credential's
hosts. No token is logged or put in an error message.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from nexus.adapters.inbound.base import Rejected
from nexus.adapters.inbound.gmail import OWN_LABELS, message_event, unreadable_event
from nexus.engine.credentials import CredentialError, SecretSource
from nexus.engine.destinations import DEFAULT_PORTS, Destination, credential_refusal
from nexus.event import NexusEvent
from nexus.ids import Clock, now_ms
from nexus.ingest.gmail import GmailError, HistoryExpired, HistoryPage, Watch

USER = "me"  # the mailbox the access token belongs to
# An access token is renewed this long before Google says it expires, so a request never
# starts with one that lapses on the way.
EXPIRY_MARGIN_MS = 60_000
HISTORY_PAGE_SIZE = 500  # Gmail's most per page
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class GmailUnavailable(GmailError):
    """Gmail (or its token endpoint) did not answer, or answered 429/5xx: try later."""


@dataclass(frozen=True)
class OAuthClient:
    """The installed-app OAuth client and the mailbox's refresh token."""

    client_id: str
    client_secret: str
    refresh_token: str

    def __repr__(self) -> str:
        return f"OAuthClient(client_id={self.client_id!r})"  # never the secrets


def read_oauth_client(credential_id: str, value: str) -> OAuthClient:
    """The credential's JSON, or a GmailError naming what is missing (never a value)."""
    try:
        found = json.loads(value)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise GmailError(
            f"credential {credential_id!r} is not JSON with client_id, client_secret and "
            "refresh_token"
        )
    fields = ("client_id", "client_secret", "refresh_token")
    missing = [name for name in fields if not isinstance(found.get(name), str) or not found[name]]
    if missing:
        raise GmailError(f"credential {credential_id!r} lacks {', '.join(missing)}")
    return OAuthClient(*(str(found[name]) for name in fields))


def destination_of(url: httpx.URL) -> Destination:
    """The request's target as the credential check reads it."""
    port = url.port or DEFAULT_PORTS.get(url.scheme, 0)
    return Destination(url.scheme, url.host.lower(), port, url.path)


class GmailApi:
    """One mailbox (the GmailMailbox port), and the sender's way to send from it."""

    def __init__(
        self,
        *,
        mailbox: str,
        credential: str,
        secrets: SecretSource,
        api_base: str,
        token_url: str,
        client: httpx.Client,
        clock: Clock = now_ms,
    ) -> None:
        self.address = mailbox.strip().lower()
        self._credential = credential
        self._secrets = secrets
        self._base = f"{api_base.rstrip('/')}/gmail/v1/users/{USER}"
        self._token_url = token_url
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._token: tuple[str, int] | None = None  # (access token, expires at ms)

    def close(self) -> None:
        self._client.close()

    # --- the port --------------------------------------------------------------------------

    def history(self, start: int, page: str | None = None) -> HistoryPage:
        params: dict[str, Any] = {
            "startHistoryId": str(start),
            "historyTypes": "messageAdded",
            "labelId": "INBOX",
            "maxResults": HISTORY_PAGE_SIZE,
        }
        if page:
            params["pageToken"] = page
        response = self._call("GET", "/history", params=params)
        if response.status_code == 404:
            raise HistoryExpired(f"history id {start} is older than Gmail keeps")
        body = self._json(response, "history.list")
        found: list[str] = []
        for record in _objects(body.get("history")):
            for added in _objects(record.get("messagesAdded")):
                message = added.get("message")
                if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                    continue
                labels = message.get("labelIds")
                if isinstance(labels, list) and OWN_LABELS & set(map(str, labels)):
                    continue  # our own sent mail: never fetched, never answered
                found.append(message["id"])
        token = body.get("nextPageToken")
        return HistoryPage(
            message_ids=tuple(found),
            history_id=_history_id(body.get("historyId"), "history.list"),
            next_page=token if isinstance(token, str) and token else None,
        )

    def message(self, message_id: str) -> NexusEvent | None:
        response = self._call("GET", f"/messages/{message_id}", params={"format": "raw"})
        if response.status_code == 404:
            return None
        body = self._json(response, "messages.get")
        try:
            # Validated as it will be stored (`model_copy` does not validate).
            return NexusEvent.model_validate(dict(message_event(body, self.address)))
        except Rejected as error:
            return unreadable_event(message_id, error.reason)
        except (ValueError, TypeError, LookupError, AttributeError, RecursionError) as error:
            # Hostile MIME, or a field the ledger cannot hold: recorded, never a stuck sync.
            return unreadable_event(message_id, f"{type(error).__name__}: {str(error)[:200]}")

    def recent(self, *, after_s: int | None, limit: int) -> list[str]:
        params: dict[str, Any] = {"labelIds": "INBOX", "maxResults": limit}
        if after_s is not None:
            params["q"] = f"after:{after_s}"
        body = self._json(self._call("GET", "/messages", params=params), "messages.list")
        ids = [m["id"] for m in _objects(body.get("messages")) if isinstance(m.get("id"), str)]
        return ids[:limit]

    def current_history_id(self) -> int:
        body = self._json(self._call("GET", "/profile"), "getProfile")
        return _history_id(body.get("historyId"), "getProfile")

    def watch(self, topic: str) -> Watch:
        request = {"topicName": topic, "labelIds": ["INBOX"], "labelFilterBehavior": "INCLUDE"}
        body = self._json(self._call("POST", "/watch", json=request), "watch")
        expiration = str(body.get("expiration", ""))
        if not (expiration.isascii() and expiration.isdigit()):
            raise GmailError("watch answered without an expiration")
        return Watch(_history_id(body.get("historyId"), "watch"), int(expiration))

    def send_raw(self, raw: str, thread_id: str | None) -> httpx.Response:
        """`messages.send` of a base64url RFC 822 message, in `thread_id`'s thread; the
        answer as is, for the sender to classify. GmailError without a usable token."""
        body: dict[str, Any] = {"raw": raw}
        if thread_id:
            body["threadId"] = thread_id
        return self._call("POST", "/messages/send", json=body)

    # --- requests and tokens ---------------------------------------------------------------

    def _call(self, method: str, path: str, **options: Any) -> httpx.Response:
        """One API request with a current access token; a 401 refreshes it once."""
        request = self._client.build_request(method, f"{self._base}{path}", **options)
        self._allowed(request.url, "the Gmail API")
        for attempt in (1, 2):
            request.headers["Authorization"] = f"Bearer {self._access_token(fresh=attempt > 1)}"
            try:
                response = self._client.send(request)
            except httpx.HTTPError as error:
                raise GmailUnavailable(
                    f"Gmail API {method} {path}: {type(error).__name__}"
                ) from None
            if response.status_code != 401:
                return response
        return response

    def _json(self, response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code in _TRANSIENT_STATUS:
            raise GmailUnavailable(f"Gmail {what}: HTTP {response.status_code}")
        if not response.is_success:
            raise GmailError(f"Gmail {what}: HTTP {response.status_code}: {_reason(response)}")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise GmailError(f"Gmail {what} answered something other than a JSON object")
        return body

    def _access_token(self, *, fresh: bool) -> str:
        with self._lock:
            now = self._clock()
            if not fresh and self._token is not None and self._token[1] - EXPIRY_MARGIN_MS > now:
                return self._token[0]
            token, expires_in_s = self._refresh()
            self._token = (token, now + expires_in_s * 1000)
            return token

    def _refresh(self) -> tuple[str, int]:
        try:
            oauth = read_oauth_client(self._credential, self._secrets.secret(self._credential))
        except CredentialError as error:
            raise GmailError(str(error)) from None
        self._allowed(httpx.URL(self._token_url), "the OAuth token endpoint")
        form = {
            "grant_type": "refresh_token",
            "client_id": oauth.client_id,
            "client_secret": oauth.client_secret,
            "refresh_token": oauth.refresh_token,
        }
        try:
            response = self._client.post(self._token_url, data=form)
        except httpx.HTTPError as error:
            raise GmailUnavailable(f"OAuth token endpoint: {type(error).__name__}") from None
        if response.status_code in _TRANSIENT_STATUS:
            raise GmailUnavailable(f"OAuth token endpoint: HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not response.is_success or not isinstance(body, dict):
            # Google's error body is {"error": "invalid_grant", ...}: no secret in it.
            code = body.get("error") if isinstance(body, dict) else None
            raise GmailError(
                f"the OAuth token endpoint refused credential {self._credential!r}: "
                f"HTTP {response.status_code} {str(code or '')[:60]}".rstrip()
                + " (renew the refresh token)"
            )
        token, expires_in = body.get("access_token"), body.get("expires_in", 3600)
        if not isinstance(token, str) or not token:
            raise GmailError("the OAuth token endpoint answered without an access_token")
        lifetime = expires_in if isinstance(expires_in, int) and expires_in > 0 else 3600
        return token, lifetime

    def _allowed(self, url: httpx.URL, what: str) -> None:
        declared = self._secrets.hosts(self._credential)
        refusal = credential_refusal(self._credential, declared, destination_of(url))
        if refusal is not None:
            raise GmailError(f"{what} at {url.scheme}://{url.netloc.decode()}: {refusal}")


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _history_id(value: Any, what: str) -> int:
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not (text.isascii() and text.isdigit()) or int(text) >= 2**63:
        raise GmailError(f"Gmail {what} answered without a usable historyId")
    return int(text)


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message or response.reason_phrase)[:200]
