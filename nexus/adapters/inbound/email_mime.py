"""Email reading helpers: headers, the readable body without quoted history, attachments."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any

from nexus.adapters.inbound.attachments import attachment, capped, kind_of
from nexus.event import Attachment

# Where quoted history starts: "On <date>, <someone> wrote:" (clients fold it over two
# lines when long) or Outlook's separator. Everything from there on is old mail.
_ATTRIBUTION = re.compile(r"^On\b[^\n]*(?:\n[^\n]*)?wrote:[ \t]*$", re.MULTILINE)
_OUTLOOK = re.compile(r"^-{2,}\s*Original Message\s*-{2,}", re.MULTILINE | re.IGNORECASE)


def strip_quoted(text: str) -> str:
    """The new part of a reply; the whole text when nothing new would remain.

    Quoted lines (`>`) are cut only as a trailing block: inline answers interleaved with
    quotes keep the quotes, which they need to make sense.
    """
    text = text.replace("\r\n", "\n")
    cuts = [m.start() for p in (_ATTRIBUTION, _OUTLOOK) if (m := p.search(text)) is not None]
    lines = text[: min(cuts, default=len(text))].split("\n")
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith(">")):
        lines.pop()
    fresh = "\n".join(lines).strip()
    return fresh or text.strip()


class _TextOfHtml(HTMLParser):
    _BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "blockquote"})
    _SKIP = frozenset({"script", "style", "head", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Visible text of an HTML body, one line per block, whitespace collapsed."""
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def is_auto_reply(headers: Mapping[str, str]) -> str | None:
    """Why a message was sent by a machine (RFC 3834 and common practice), or None."""
    auto = headers.get("auto-submitted", "no").split(";")[0].strip().lower()
    if auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = headers.get("precedence", "").strip().lower()
    if precedence in ("bulk", "junk", "list"):
        return f"Precedence: {precedence}"
    if "x-autoreply" in headers or "x-autorespond" in headers:
        return "auto-responder header"
    return None


def message_id(value: str | None) -> str | None:
    """`<id@host>` → `id@host`."""
    if not value:
        return None
    stripped = value.strip().strip("<>").strip()
    return stripped or None


def thread_root(references: str | None, in_reply_to: str | None) -> str | None:
    """The conversation's first message: the oldest References id, else In-Reply-To."""
    first = (references or "").split()
    return message_id(first[0]) if first else message_id(in_reply_to)


def date_ms(value: str | None) -> int:
    """A Date header as Unix ms; 0 when absent or unreadable."""
    if not value:
        return 0
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return 0
    if moment.tzinfo is None:  # "-0000": UTC with the sender's zone unknown (RFC 5322 3.3)
        moment = moment.replace(tzinfo=UTC)
    try:
        return int(moment.timestamp() * 1000)
    except (OverflowError, ValueError):
        return 0


def _clean(value: str) -> str:
    # Undeclared 8-bit bytes arrive as surrogate escapes; make them text (or U+FFFD).
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def header_map(message: EmailMessage) -> dict[str, str]:
    """Headers as sent, lower-cased names, first occurrence, RFC 2047 words decoded.

    The raw form, not the parsed one: the parsed address headers drop old-style
    `addr (Name)` comments, which is where some senders keep their display name.
    """
    found: dict[str, str] = {}
    for key, value in message.raw_items():
        text = _clean(str(value))
        # An undecodable encoded-word keeps its raw form rather than losing the header.
        with suppress(UnicodeError, LookupError, HeaderParseError, ValueError):
            text = str(make_header(decode_header(text)))
        found.setdefault(key.lower(), " ".join(text.split()))
    return found


def _part_text(part: EmailMessage) -> str:
    # No declared charset means US-ASCII by the RFC, but 8-bit mail without one is UTF-8
    # in practice, and UTF-8 reads ASCII the same.
    content: object = None
    if part.get_content_charset() is not None:
        # An unknown charset or a broken encoding: read the bytes as UTF-8 below.
        with suppress(LookupError, ValueError, AttributeError, KeyError, AssertionError):
            content = part.get_content()
    if content is None:
        content = part.get_payload(decode=True)
    if isinstance(content, bytes):
        return content.decode("utf-8", "replace")
    return _clean(content) if isinstance(content, str) else ""


def readable_body(message: EmailMessage) -> str:
    """The text/plain body, else the text/html one as text; "" when neither is found."""
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except (LookupError, ValueError, AttributeError, KeyError):
        part = None  # broken MIME trees: no body rather than no event
    if not isinstance(part, EmailMessage):
        return ""
    text = _part_text(part)
    return html_to_text(text) if part.get_content_type() == "text/html" else text


def mime_attachments(message: EmailMessage) -> tuple[Attachment, ...]:
    """Leaf parts that are files (attachment disposition or a filename): metadata only."""
    found = []
    for part in message.walk():
        if part.is_multipart():
            continue
        filename = part.get_filename()
        if part.get_content_disposition() != "attachment" and not filename:
            continue
        payload = part.get_payload(decode=True)
        found.append(
            attachment(
                kind_of(part.get_content_type()),
                name=_clean(filename) if filename else None,
                mime_type=part.get_content_type(),
                size=len(payload) if isinstance(payload, bytes) else None,
            )
        )
    return capped(found)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _objs(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list; nothing when it is not one."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _gmail_data(part: dict[str, Any]) -> str | None:
    data = _obj(part.get("body")).get("data")
    if not isinstance(data, str):
        return None
    try:
        decoded = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return None
    return decoded.decode("utf-8", "replace")


def gmail_headers(payload: dict[str, Any]) -> dict[str, str]:
    """A Gmail payload's `headers` list as lower-cased name → first value."""
    found: dict[str, str] = {}
    for header in _objs(payload.get("headers")):
        found.setdefault(str(header.get("name", "")).lower(), str(header.get("value", "")))
    return found


def gmail_parts(
    payload: dict[str, Any],
) -> tuple[str | None, str | None, tuple[Attachment, ...]]:
    """A Gmail `payload` tree → (first text/plain, first text/html, attachments)."""
    plain: str | None = None
    html: str | None = None
    attachments: list[Attachment] = []
    pending = [payload]
    while pending:
        part = pending.pop(0)  # breadth first: the top-level body before nested forwards
        pending.extend(_objs(part.get("parts")))
        mime, body = part.get("mimeType"), _obj(part.get("body"))
        if part.get("filename"):
            attachments.append(
                attachment(
                    kind_of(mime),
                    file_id=body.get("attachmentId"),
                    name=str(part["filename"]),
                    mime_type=mime,
                    size=body.get("size"),
                )
            )
        elif mime == "text/plain" and plain is None:
            plain = _gmail_data(part)
        elif mime == "text/html" and html is None:
            html = _gmail_data(part)
    return plain, html, capped(attachments)


def without_attachment_bytes(part: dict[str, Any]) -> dict[str, Any]:
    """A copy of a Gmail payload tree with inlined attachment data removed."""
    copy = dict(part)
    if part.get("filename") and isinstance(part.get("body"), dict):
        copy["body"] = {k: v for k, v in part["body"].items() if k != "data"}
    if isinstance(part.get("parts"), list):
        copy["parts"] = [
            without_attachment_bytes(p) if isinstance(p, dict) else p for p in part["parts"]
        ]
    return copy
