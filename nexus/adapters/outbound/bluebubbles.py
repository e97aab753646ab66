"""iMessage out through a BlueBubbles server's REST API: texts by chat GUID, files,
tapbacks and the typing indicator.

Every call carries the server password as the `password` query parameter (the only way
BlueBubbles takes it), so no URL is ever put in an error, and the password is blanked from
whatever text an error holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote, quote_plus

import httpx
import structlog

from nexus.adapters.outbound.http import classify, new_client, transport_failure
from nexus.adapters.pinned_fetch import FetchFailed, FetchRefused, PinnedDownloads
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, SendResult, Sent

SendMethod = Literal["apple-script", "private-api"]
# The tapbacks BlueBubbles sends (`-love` takes one back); each needs its Private API.
TAPBACKS = frozenset(
    {"love", "like", "dislike", "laugh", "emphasize", "question"}
    | {f"-{name}" for name in ("love", "like", "dislike", "laugh", "emphasize", "question")}
)
# What BlueBubbles answers (400) for a tempGuid it is still sending: the first attempt has
# the chunk, so a retry of it must not be taken for a failure (nor be sent again).
_IN_FLIGHT = "already queued"
# The typing indicator is a courtesy: a call that takes longer than this is given up.
TYPING_TIMEOUT_S = 5.0

log = structlog.get_logger(__name__)


def tapback(reaction: str) -> str:
    """The reaction as BlueBubbles names it, or ValueError naming the ones it takes (pure)."""
    if reaction not in TAPBACKS:
        raise ValueError(f"{reaction!r} is not a tapback; one of {', '.join(sorted(TAPBACKS))}")
    return reaction


class BlueBubblesClient:
    """One BlueBubbles server: its URL and password. Each call answers a SendResult."""

    def __init__(
        self,
        base_url: str | None,
        password: str | None,
        *,
        method: SendMethod = "apple-script",
        client: httpx.Client | None = None,
    ) -> None:
        self._base = base_url.rstrip("/") if base_url else None
        self._password = password
        self.method: SendMethod = method
        self._client = client or new_client()

    def missing(self) -> str | None:
        """Which setting is missing, or None when the server can be called."""
        if not self._base:
            return "NEXUS_BLUEBUBBLES_URL is not set"
        if not self._password:
            return "NEXUS_BLUEBUBBLES_PASSWORD is not set"
        return None

    def send_text(self, chat_guid: str, text: str, temp_guid: str) -> SendResult:
        """`POST /api/v1/message/text`; `temp_guid` names the send (echoed on its webhook)."""
        body = {
            "chatGuid": chat_guid,
            "tempGuid": temp_guid,
            "message": text,
            "method": self.method,
        }
        return self._call("POST", "/api/v1/message/text", json=body)

    def send_attachment(
        self, chat_guid: str, name: str, data: bytes, mime_type: str | None, temp_guid: str
    ) -> SendResult:
        """`POST /api/v1/message/attachment`, multipart: the file as `attachment`."""
        form = {"chatGuid": chat_guid, "tempGuid": temp_guid, "name": name, "method": self.method}
        files = {"attachment": (name, data, mime_type or "application/octet-stream")}
        return self._call("POST", "/api/v1/message/attachment", data=form, files=files)

    def react(self, chat_guid: str, message_guid: str, reaction: str) -> SendResult:
        """A tapback on the message `message_guid` (Private API)."""
        body = {
            "chatGuid": chat_guid,
            "selectedMessageGuid": message_guid,
            "reaction": tapback(reaction),
        }
        return self._call("POST", "/api/v1/message/react", json=body)

    def typing(self, chat_guid: str, *, on: bool, timeout_s: float | None = None) -> SendResult:
        """Show (`on`) or stop the typing indicator in the chat (Private API); `timeout_s`
        bounds the call tighter than the client's own timeout."""
        path = f"/api/v1/chat/{quote(chat_guid, safe='')}/typing"
        bound: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        return self._call("POST" if on else "DELETE", path, **bound)

    def close(self) -> None:
        self._client.close()

    # -- HTTP --------------------------------------------------------------------------------

    def _call(self, method: str, path: str, **request: Any) -> SendResult:
        problem = self.missing()
        if problem is not None:
            return Refused(problem)
        try:
            response = self._client.request(
                method,
                f"{self._base}{path}",
                params={"password": self._password or ""},
                **request,
            )
        except httpx.HTTPError as error:
            return self._scrubbed(transport_failure(error))
        result = classify(response, message_id=_message_guid)
        if isinstance(result, Refused) and _IN_FLIGHT in result.error.lower():
            return Sent(None)  # a repeat of a send still under way: the first one has it
        return self._scrubbed(result)

    def _scrubbed(self, result: SendResult) -> SendResult:
        """The result with the password (as typed, or URL-encoded) blanked from its error."""
        if isinstance(result, Sent) or not self._password:
            return result
        error = result.error
        for form in {self._password, quote(self._password, safe=""), quote_plus(self._password)}:
            error = error.replace(form, "[redacted]")
        if isinstance(result, RetryLater):
            return RetryLater(error, result.retry_after_ms)
        return Refused(error)


def _message_guid(body: Any) -> str | None:
    data = body.get("data") if isinstance(body, dict) else None
    found = data.get("guid") if isinstance(data, dict) else None
    return str(found) if found else None


class BlueBubblesSender:
    """Replies to iMessage chats: each chunk a text to the chat GUID it came from, a
    tapback (a delivery whose target holds `tapback`) on the message answered, a file (a
    delivery whose target holds `file`: url, name, mime_type) downloaded through
    `downloads` and uploaded to the chat; and the typing indicator while a turn runs."""

    name = "bluebubbles"

    def __init__(self, client: BlueBubblesClient, downloads: PinnedDownloads | None = None) -> None:
        self.client = client
        # The model chose the URL: it is fetched checked and pinned, like http_fetch.
        self.downloads = downloads

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        # The tempGuid (the delivery id) stops a second send only while the first is still
        # under way; once it has landed, the same call makes a second message.
        return False

    def send(self, delivery: DeliveryRecord) -> SendResult:
        chat = delivery.target.get("chat_guid")
        if not isinstance(chat, str) or not chat:
            return Refused("the reply has no chat_guid to send to")
        reaction = delivery.target.get("tapback")
        if isinstance(reaction, dict):
            message, name = reaction.get("message_guid"), reaction.get("reaction")
            if not isinstance(message, str) or not message or not isinstance(name, str):
                return Refused("the tapback needs a message_guid and a reaction")
            try:
                return self.client.react(chat, message, name)
            except ValueError as error:  # not one of the tapbacks BlueBubbles sends
                return Refused(str(error))
        file = delivery.target.get("file")
        if isinstance(file, dict):
            return self._send_file(chat, file, delivery.id)
        return self.client.send_text(chat, delivery.text, temp_guid=delivery.id)

    def _send_file(self, chat: str, file: Mapping[str, Any], delivery_id: str) -> SendResult:
        """Download the reply's file and upload it to the chat; a refused or failed download
        fails this delivery alone (the text went as a delivery of its own)."""
        url, name, mime = file.get("url"), file.get("name"), file.get("mime_type")
        if not isinstance(url, str) or not url or not isinstance(name, str) or not name:
            return Refused("the attachment needs a url and a name")
        if self.downloads is None:
            return Refused("reply attachments are not downloaded by this sender")
        try:
            fetched = self.downloads.download(url)
        except FetchRefused as refused:
            log.warning("security.address_refused", reason=refused.reason, delivery=delivery_id)
            return Refused(f"the attachment was not fetched: {refused.reason}")
        except FetchFailed as failed:
            reason = f"the attachment could not be fetched: {failed.reason}"
            return Refused(reason) if failed.permanent else RetryLater(reason)
        given = mime if isinstance(mime, str) and mime else None
        return self.client.send_attachment(
            chat, name, fetched.data, given or fetched.mime_type, temp_guid=delivery_id
        )

    def typing(self, target: Mapping[str, Any], *, on: bool) -> SendResult:
        """Show or stop "typing…" in the chat a reply to `target` goes to."""
        chat = target.get("chat_guid")
        if not isinstance(chat, str) or not chat:
            return Refused("no chat_guid to show typing in")
        return self.client.typing(chat, on=on, timeout_s=TYPING_TIMEOUT_S)
