"""Twilio Messaging webhooks (SMS, MMS, WhatsApp via Twilio) and status callbacks."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from twilio.request_validator import RequestValidator

from nexus.adapters.inbound.attachments import attachment, kind_of
from nexus.adapters.inbound.base import (
    ImmediateAnswer,
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.signatures import SecretAdapter, required_header
from nexus.event import Author, Container, NexusEvent

SIGNATURE_HEADER = "X-Twilio-Signature"
# Twilio wants TwiML back; an empty Response means "no reply from this webhook": Nexus
# answers later through the REST API, once the turn has run.
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
_INBOUND = ("received", "")
# Twilio attaches at most ten media to a message; NumMedia is read no further than that, so
# a signed "NumMedia=99999999999999999999" costs ten lookups, not an endless loop.
MAX_MEDIA = 10


def _form(body: bytes) -> dict[str, str]:
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError as error:
        raise MalformedRequest(f"a Twilio webhook is a UTF-8 form body: {error}") from error


class TwilioAdapter(SecretAdapter):
    name = "twilio"
    configured_by = "NEXUS_TWILIO_AUTH_TOKEN"

    def __init__(self, auth_token: str | None, public_base_url: str | None = None) -> None:
        super().__init__(auth_token)
        self._public = public_base_url.rstrip("/") if public_base_url else None

    def signed_url(self, request: InboundRequest) -> str:
        """The URL Twilio requested: behind a TLS-terminating proxy the app sees another."""
        if self._public is None:
            return request.url
        parts = urlsplit(request.url)
        return self._public + parts.path + (f"?{parts.query}" if parts.query else "")

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # Twilio defines no replay window; MessageSid deduplicates redeliveries.
        token = self.configured_secret()
        signature = required_header(request, SIGNATURE_HEADER)
        try:
            params = _form(request.body)
        except MalformedRequest as error:
            raise SignatureRejected(f"cannot check the signature: {error.reason}") from error
        if not RequestValidator(token).validate(self.signed_url(request), params, signature):
            raise SignatureRejected(
                f"{SIGNATURE_HEADER} does not match (is NEXUS_PUBLIC_URL the URL Twilio calls?)"
            )

    def parse(self, request: InboundRequest) -> InboundOutcome:
        form = _form(request.body)
        sid = form.get("MessageSid") or form.get("SmsMessageSid")
        if not sid:
            raise MalformedRequest("a Twilio messaging webhook needs a MessageSid")
        status = form.get("MessageStatus") or form.get("SmsStatus") or ""
        event = _status(sid, status, form) if status not in _INBOUND else _inbound(sid, form)
        return InboundOutcome(
            events=(event,), answer=ImmediateAnswer(EMPTY_TWIML, media_type="application/xml")
        )


def _platform(address: str) -> str:
    return "whatsapp" if address.startswith("whatsapp:") else "sms"


def _inbound(sid: str, form: dict[str, str]) -> NexusEvent:
    sender = form.get("From")
    if not sender:
        raise MalformedRequest("an inbound Twilio message needs From")
    try:
        media_count = int(form.get("NumMedia") or 0)
    except ValueError as error:
        raise MalformedRequest("NumMedia must be a number") from error
    # Twilio serves media without auth unless the account turns on "HTTP Basic
    # Authentication for media"; the URL's last part is the media's own sid.
    attachments = tuple(
        attachment(
            kind_of(form.get(f"MediaContentType{i}")),
            file_id=form[f"MediaUrl{i}"].rstrip("/").rsplit("/", 1)[-1] or None,
            url=form[f"MediaUrl{i}"],
            mime_type=form.get(f"MediaContentType{i}"),
        )
        for i in range(min(media_count, MAX_MEDIA))
        if form.get(f"MediaUrl{i}")
    )
    event = NexusEvent(
        id=bounded_id("twilio:", sid),
        adapter="twilio",
        platform=_platform(sender),
        space=form.get("To") or form.get("MessagingServiceSid"),
        sender=Author(id=sender, display_name=form.get("ProfileName")),
        container=Container(kind="dm", id=sender),
        text=form.get("Body") or None,
        attachments=attachments,
        message_id=sid,
        # Twilio dates nothing in the webhook; the ledger's received_at is the arrival time.
        occurred_at=0,
        raw=form,
    )
    if event.text is None and not attachments:
        return event.model_copy(update={"kind": "unsupported", "ignore_reason": "empty message"})
    return event


def _status(sid: str, status: str, form: dict[str, str]) -> NexusEvent:
    error = form.get("ErrorCode")
    return NexusEvent(
        id=bounded_id("twilio:status:", f"{sid}:{status}"),
        adapter="twilio",
        platform=_platform(form.get("To", "")),
        kind="status",
        space=form.get("From") or form.get("MessagingServiceSid"),
        message_id=sid,
        occurred_at=0,
        raw=form,
        ignore_reason=f"delivery status {status}" + (f" (error {error})" if error else ""),
        delivery_status=status,
    )
