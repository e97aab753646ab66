"""Attachments as the model sees them: image and document blocks, or a line describing each.

A stored user message keeps only its files' metadata. Where the platform serves a file at
a public URL, the model is handed the URL. Where fetching needs a token (Telegram's file
URL contains the bot token; Slack and WhatsApp want a bearer token), the message is
rendered with a `FETCH` placeholder, and `resolve` swaps it, at turn time and outside the
ledger, for the bytes fetched through an `AttachmentSource` — or for a line saying why not.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nexus.engine.model import Block, ModelPort, ModelRequest, ModelStreamEvent
from nexus.engine.prefix_sums import PrefixSums

# What the Messages API reads: these images, and PDFs as documents.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
DOCUMENT_TYPES = frozenset({"application/pdf"})
# Text the model reads as a plain-text document (with every `text/*` type). Only where Nexus
# keeps the bytes itself (TEXT_PLATFORMS): elsewhere a text file stays a described line.
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/x-yaml"}
)
TEXT_PLATFORMS = frozenset({"files"})
# Platforms whose recorded URL needs the platform's token: the model cannot open it.
PRIVATE_URL_PLATFORMS = frozenset({"slack"})
FETCH = "nexus_attachment_fetch"  # a placeholder block; never sent to a model
# Files shown per request, the newest: a conversation full of photos neither downloads them
# all again on every turn nor grows its requests without end, and an old URL that expired
# (Discord's CDN links last about a day) cannot fail every later request.
MAX_SHOWN = 4


@dataclass(frozen=True)
class Fetched:
    data: bytes
    mime_type: str | None = None  # as the platform served it


class AttachmentUnavailable(Exception):
    """The file could not be fetched; `reason` is safe to show (it never holds a token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AttachmentSource(Protocol):
    """Fetches a platform's file (with its token, a size cap and a timeout)."""

    def fetch(self, platform: str, attachment: Mapping[str, Any]) -> Fetched:
        """The file's bytes, or AttachmentUnavailable."""
        ...


def _mime(item: Mapping[str, Any]) -> str:
    value = item.get("mime_type")
    return value.split(";", 1)[0].strip().lower() if isinstance(value, str) else ""


def is_text(mime_type: str | None) -> bool:
    """A type the model reads as plain text."""
    mime = (mime_type or "").split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in TEXT_TYPES


def readable_as(item: Mapping[str, Any]) -> str | None:
    """ "image" or "document" when the model can read the file itself; None otherwise."""
    mime = _mime(item)
    if mime in IMAGE_TYPES:
        return "image"
    if mime in DOCUMENT_TYPES:
        return "document"
    return None


def _size(size: Any) -> str | None:
    if not isinstance(size, int) or isinstance(size, bool):
        return None
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _one_line(value: Any) -> str:
    """A sender's file name on one line: it cannot pose as a line of its own."""
    return " ".join(str(value).split())


def describe(item: Mapping[str, Any]) -> str:
    """One line the model can read: `[attachment] voice "memo.ogg", audio/ogg, 23.0 KB, 5 s`."""
    kind = _one_line(item.get("kind") or "file")
    name = _one_line(item.get("name") or "")
    parts = [f'{kind} "{name}"' if name else kind]
    if item.get("mime_type"):
        parts.append(_one_line(item["mime_type"]))
    if (size := _size(item.get("size"))) is not None:
        parts.append(size)
    width, height = item.get("width"), item.get("height")
    if isinstance(width, int) and isinstance(height, int):
        parts.append(f"{width}x{height}")
    if isinstance(item.get("duration"), int):
        parts.append(f"{item['duration']} s")
    return "[attachment] " + ", ".join(parts)


def attachment_blocks(items: Sequence[Mapping[str, Any]], platform: str | None) -> list[Block]:
    """Each attachment's line, then, for an image or a PDF, the file itself: by URL where
    the platform's URL is public, else a FETCH placeholder for `resolve`. A text (where the
    platform is one of TEXT_PLATFORMS) is always fetched: the API takes no text by URL."""
    blocks: list[Block] = []
    for item in items:
        blocks.append({"type": "text", "text": describe(item)})
        shape = readable_as(item)
        url = item.get("url")
        if shape is None and platform in TEXT_PLATFORMS and is_text(item.get("mime_type")):
            if item.get("file_id"):
                blocks.append(
                    {"type": FETCH, "as": "text", "platform": platform, "item": dict(item)}
                )
            continue
        if shape is None:
            continue
        public = platform not in PRIVATE_URL_PLATFORMS
        if public and isinstance(url, str) and url.startswith("https://"):
            blocks.append({"type": shape, "source": {"type": "url", "url": url}})
            continue
        if item.get("file_id") or url:
            blocks.append({"type": FETCH, "as": shape, "platform": platform, "item": dict(item)})
    return blocks


def _fetched_block(block: Block, source: AttachmentSource | None) -> Block:
    shape, item = str(block["as"]), block["item"]
    if source is None:
        return {"type": "text", "text": f"(the {shape} is not shown: no way to fetch it here)"}
    try:
        fetched = source.fetch(str(block.get("platform") or ""), item)
    except AttachmentUnavailable as error:
        return {"type": "text", "text": f"(the {shape} is not shown: {error.reason})"}
    if shape == "text":
        text = fetched.data.decode("utf-8", errors="replace")
        document: Block = {"type": "document", "source": _text_source(text)}
        if item.get("name"):
            document["title"] = _one_line(item["name"])
        return document
    media_type = _mime(item)
    if shape == "image" and fetched.mime_type in IMAGE_TYPES:
        media_type = fetched.mime_type  # the bytes' own type, where the platform says it
    data = base64.b64encode(fetched.data).decode("ascii")
    return {"type": shape, "source": {"type": "base64", "media_type": media_type, "data": data}}


def _text_source(text: str) -> dict[str, Any]:
    return {"type": "text", "media_type": "text/plain", "data": text}


# A file the model is handed: a placeholder (FETCH), or one of these by URL.
_BY_URL = frozenset({"image", "document"})


def _is_file(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    return kind == FETCH or (kind in _BY_URL and isinstance(block.get("source"), dict))


def _places(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for m, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        for b, block in enumerate(message["content"]):
            if _is_file(block):
                found.append((m, b))
    return found


def files_in(message: Mapping[str, Any]) -> int:
    """The files a message hands the model (a user's FETCH placeholders and by-URL files)."""
    if message.get("role") != "user":
        return 0
    return sum(1 for block in message["content"] if _is_file(block))


def file_counts() -> PrefixSums:
    """Files per request, counted only in what is new since the conversation's last request
    (see PrefixSums): a history without files costs its new messages, not its length."""
    return PrefixSums(files_in)


def resolve(
    messages: Sequence[Mapping[str, Any]],
    source: AttachmentSource | None,
    memo: dict[str, Block] | None = None,
) -> tuple[dict[str, Any], ...]:
    """The messages with the newest MAX_SHOWN files kept (a FETCH placeholder replaced by
    the file, or a line saying why not) and older ones replaced by a note. New lists: the
    caller's messages (shared with a render cache) are left as they are. `memo` keeps
    fetched blocks across the model calls of one turn."""
    memo = {} if memo is None else memo
    places = _places(messages)
    newest = set(places[-MAX_SHOWN:])
    resolved = [dict(message) for message in messages]
    for m, b in places:
        content = resolved[m]["content"] = list(resolved[m]["content"])
        block = content[b]
        if (m, b) not in newest:
            shape = block.get("as") or block.get("type")
            content[b] = {"type": "text", "text": f"(an earlier {shape}: not repeated)"}
            continue
        if block.get("type") != FETCH:
            continue  # by URL: the API fetches it
        key = f"{block.get('platform')}:{block['item'].get('file_id') or block['item'].get('url')}"
        if key not in memo:
            memo[key] = _fetched_block(block, source)
        content[b] = memo[key]
    return tuple(resolved)


@dataclass
class WithAttachments:
    """A model port that resolves the files of each request of one turn before the call:
    they are fetched once per turn (`memo`), never stored."""

    inner: ModelPort
    source: AttachmentSource | None
    # Long-lived (the engine's): which requests hold files at all, known without reading a
    # whole history on every model call.
    files: PrefixSums = field(default_factory=file_counts)
    memo: dict[str, Block] = field(default_factory=dict)
    provider: str = ""

    def __post_init__(self) -> None:
        self.provider = self.inner.provider

    def stream(self, request: ModelRequest) -> Generator[ModelStreamEvent, None, None]:
        if self.files.total(request.messages):
            messages = resolve(request.messages, self.source, self.memo)
            request = dataclasses.replace(request, messages=messages)
        yield from self.inner.stream(request)
