"""Attachments as adapters record them: platform metadata clipped to fit, never refused."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nexus.event import MAX_ATTACHMENTS, MAX_COUNT, Attachment

# Clipped, a name or a mime type still says what the file is; a clipped id or URL would
# point somewhere else, so one that does not fit is dropped instead.
_CLIPPED = {"kind": 32, "mime_type": 128, "name": 255}
_WHOLE_OR_NOTHING = {"file_id": 512, "url": 2048}


def _text(value: Any, limit: int, *, clip: bool) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # Discord and WhatsApp ids arrive as numbers at times
    if not isinstance(value, str) or not value:
        return None
    if len(value) <= limit:
        return value
    return value[:limit] if clip else None


def _count(value: Any) -> int | None:
    """A size, a dimension or a duration: a whole number in range, or unknown."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # Discord's duration_secs is a float
    elif isinstance(value, float) and 0 <= value < MAX_COUNT:
        value = round(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def attachment(
    kind: str,
    *,
    file_id: Any = None,
    url: Any = None,
    mime_type: Any = None,
    name: Any = None,
    size: Any = None,
    width: Any = None,
    height: Any = None,
    duration: Any = None,
) -> Attachment:
    """An Attachment from whatever the platform sent: a field of the wrong type or out of
    range is unknown, an over-long name is clipped: an odd field is no reason to lose the
    message (a 4xx would make the platform drop it; a 5xx would make it retry forever)."""
    texts = {"kind": kind, "mime_type": mime_type, "name": name}
    clipped = {key: _text(value, _CLIPPED[key], clip=True) for key, value in texts.items()}
    whole = {"file_id": file_id, "url": url}
    kept = {key: _text(value, _WHOLE_OR_NOTHING[key], clip=False) for key, value in whole.items()}
    return Attachment(
        kind=clipped["kind"] or "file",
        file_id=kept["file_id"],
        url=kept["url"],
        mime_type=clipped["mime_type"],
        name=clipped["name"],
        size=_count(size),
        width=_count(width),
        height=_count(height),
        duration=_count(duration),
    )


def capped(found: Iterable[Attachment]) -> tuple[Attachment, ...]:
    """The first MAX_ATTACHMENTS: a body listing ten thousand files keeps twenty."""
    kept: list[Attachment] = []
    for item in found:
        if len(kept) == MAX_ATTACHMENTS:
            break
        kept.append(item)
    return tuple(kept)


def kind_of(mime_type: Any, default: str = "file") -> str:
    """image, audio or video by the mime type's major part; a PDF is a document."""
    if not isinstance(mime_type, str):
        return default
    if mime_type.lower() == "application/pdf":
        return "document"
    major = mime_type.split("/", 1)[0].lower()
    return major if major in ("image", "audio", "video") else default


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
