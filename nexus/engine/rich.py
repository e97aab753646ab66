"""The rich reply form: buttons and embeds that go with a reply's text, checked (pure).

One form for every platform, held to the strictest platform's limits, so a reply the
model built is never a 400 at send time: text that is too long is cut (and the model is
told), a shape no platform can show is refused with a message saying what to change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_ROWS = 5  # Discord: five action rows a message
MAX_PER_ROW = 5  # Discord: five buttons a row
MAX_LABEL = 75  # Slack's button text (Discord allows 80)
MAX_VALUE_BYTES = 64  # Telegram's callback_data (Slack 2,000, Discord's custom_id 100)
MAX_URL = 512  # Discord's link buttons
MAX_EMBEDS = 10  # Discord
MAX_TITLE = 256
MAX_DESCRIPTION = 4096
MAX_FIELDS = 10  # Slack's section fields (Discord allows 25)
MAX_FIELD_NAME = 256
MAX_FIELD_VALUE = 1024
MAX_EMBED_CHARS = 6000  # Discord: all embeds of a message together
MAX_ATTACHMENTS = 10  # files sent with one reply
ATTACHMENT_KINDS = ("audio", "image", "video", "document")
_ELLIPSIS = "…"


# The reactions a reply may put on the message it answers: iMessage's tapbacks, which the
# other platforms' emoji reactions could map onto.
REACTIONS = ("love", "like", "dislike", "laugh", "emphasize", "question")


def parse_reaction(value: Any) -> str:
    """The reaction, checked, or RichReplyError naming the ones there are (pure)."""
    if not isinstance(value, str) or value.strip().lower() not in REACTIONS:
        raise RichReplyError(f"reaction must be one of {', '.join(REACTIONS)}; got {value!r}")
    return value.strip().lower()


class RichReplyError(ValueError):
    """The form cannot be shown on every platform; the message says what to change."""


@dataclass(frozen=True)
class Button:
    """A choice (`value` comes back as the person's message when pressed) or a link."""

    label: str
    value: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class EmbedField:
    name: str
    value: str
    inline: bool = False


@dataclass(frozen=True)
class Embed:
    title: str | None = None
    description: str | None = None
    url: str | None = None
    fields: tuple[EmbedField, ...] = ()
    image_url: str | None = None


@dataclass(frozen=True)
class ReplyAttachment:
    """A file sent with the reply, by its URL: an audio file (sent as a voice note where the
    platform has them), an image, a video or a document."""

    url: str
    kind: str  # one of ATTACHMENT_KINDS
    name: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True)
class RichReply:
    """Rows of buttons, a list of embeds and files to send; `notes` say what was cut."""

    buttons: tuple[tuple[Button, ...], ...] = ()
    embeds: tuple[Embed, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)
    attachments: tuple[ReplyAttachment, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.buttons and not self.embeds and not self.attachments

    @property
    def choices(self) -> tuple[Button, ...]:
        return tuple(b for row in self.buttons for b in row if b.value is not None)

    def to_json(self) -> dict[str, Any]:
        """The form as `parse_rich` reads it (what is stored and what a webhook receives)."""
        form: dict[str, Any] = {
            "buttons": [[_present(vars(b)) for b in row] for row in self.buttons],
            "embeds": [
                _present({**vars(e), "fields": [vars(f) for f in e.fields] if e.fields else None})
                for e in self.embeds
            ],
        }
        if self.attachments:
            form["attachments"] = [_present(vars(a)) for a in self.attachments]
        return form


def parse_rich(data: Mapping[str, Any]) -> RichReply:
    """A checked RichReply from its JSON form, or RichReplyError saying what is wrong.

    `buttons` is a list of rows (lists of buttons); a flat list of buttons puts each on its
    own row. Too-long text is cut; too many things, or a bad value or URL, is refused.
    """
    notes: list[str] = []
    rows = _rows(data.get("buttons"))
    buttons = tuple(
        tuple(_button(raw, f"button {r + 1}.{c + 1}", notes) for c, raw in enumerate(row))
        for r, row in enumerate(rows)
    )
    values = [b.value for b in (b for row in buttons for b in row) if b.value is not None]
    if len(values) != len(set(values)):
        raise RichReplyError("two buttons have the same value; each value must be unique")
    embeds_raw = _list(data.get("embeds"), "embeds")
    if len(embeds_raw) > MAX_EMBEDS:
        raise RichReplyError(f"at most {MAX_EMBEDS} embeds, got {len(embeds_raw)}")
    embeds = tuple(_embed(raw, f"embed {n + 1}", notes) for n, raw in enumerate(embeds_raw))
    total = sum(_embed_chars(e) for e in embeds)
    if total > MAX_EMBED_CHARS:
        raise RichReplyError(
            f"the embeds hold {total} characters together; at most {MAX_EMBED_CHARS}"
        )
    files_raw = _list(data.get("attachments"), "attachments")
    if len(files_raw) > MAX_ATTACHMENTS:
        raise RichReplyError(f"at most {MAX_ATTACHMENTS} attachments, got {len(files_raw)}")
    files = tuple(_attachment(raw, f"attachment {n + 1}", notes) for n, raw in enumerate(files_raw))
    return RichReply(buttons, embeds, tuple(notes), files)


def _attachment(raw: Any, where: str, notes: list[str]) -> ReplyAttachment:
    item = _mapping(raw, where)
    kind = item.get("kind")
    if kind not in ATTACHMENT_KINDS:
        raise RichReplyError(f"{where} kind must be one of {', '.join(ATTACHMENT_KINDS)}")
    mime = item.get("mime_type")
    if mime is not None and (not isinstance(mime, str) or "/" not in mime or len(mime) > 128):
        raise RichReplyError(f"{where} mime_type must be a type such as audio/ogg")
    return ReplyAttachment(
        url=_url(item.get("url"), f"{where} url"),
        kind=str(kind),
        name=_text(item.get("name"), f"{where} name", MAX_LABEL, notes),
        mime_type=mime.lower() if isinstance(mime, str) else None,
    )


def _rows(value: Any) -> list[list[Any]]:
    items = _list(value, "buttons")
    if all(isinstance(item, Mapping) for item in items):
        rows = [[item] for item in items]  # a flat list: one choice a line
    elif all(isinstance(item, list) for item in items):
        rows = [row for row in items if row]
    else:
        raise RichReplyError("buttons must be a list of rows (lists) or a list of buttons")
    if len(rows) > MAX_ROWS:
        raise RichReplyError(f"at most {MAX_ROWS} rows of buttons, got {len(rows)}")
    for number, row in enumerate(rows, start=1):
        if len(row) > MAX_PER_ROW:
            raise RichReplyError(f"row {number} has {len(row)} buttons; at most {MAX_PER_ROW}")
    return rows


def _button(raw: Any, where: str, notes: list[str]) -> Button:
    item = _mapping(raw, where)
    label = _text(item.get("label"), f"{where} label", MAX_LABEL, notes, required=True)
    value, url = item.get("value"), item.get("url")
    if (value is None) == (url is None):
        raise RichReplyError(f"{where} needs exactly one of value (a choice) or url (a link)")
    if value is not None:
        if not isinstance(value, str) or not value.strip():
            raise RichReplyError(f"{where} value must be a non-empty string")
        if len(value.encode()) > MAX_VALUE_BYTES:
            raise RichReplyError(
                f"{where} value is {len(value.encode())} bytes; at most {MAX_VALUE_BYTES} "
                "(Telegram's limit): use a short code and say what it means in the text"
            )
        return Button(label=label or "", value=value)
    return Button(label=label or "", url=_url(url, f"{where} url"))


def _embed(raw: Any, where: str, notes: list[str]) -> Embed:
    item = _mapping(raw, where)
    title = _text(item.get("title"), f"{where} title", MAX_TITLE, notes)
    description = _text(item.get("description"), f"{where} description", MAX_DESCRIPTION, notes)
    if not title and not description:
        raise RichReplyError(f"{where} needs a title or a description")
    fields_raw = _list(item.get("fields"), f"{where} fields")
    if len(fields_raw) > MAX_FIELDS:
        raise RichReplyError(f"{where} has {len(fields_raw)} fields; at most {MAX_FIELDS}")
    fields = []
    for n, raw_field in enumerate(fields_raw, start=1):
        entry = _mapping(raw_field, f"{where} field {n}")
        name = _text(entry.get("name"), f"{where} field {n} name", MAX_FIELD_NAME, notes, True)
        value = _text(entry.get("value"), f"{where} field {n} value", MAX_FIELD_VALUE, notes, True)
        fields.append(EmbedField(name or "", value or "", bool(entry.get("inline", False))))
    url, image = item.get("url"), item.get("image_url")
    return Embed(
        title=title,
        description=description,
        url=_url(url, f"{where} url") if url is not None else None,
        fields=tuple(fields),
        image_url=_url(image, f"{where} image_url") if image is not None else None,
    )


def _text(
    value: Any, where: str, limit: int, notes: list[str], required: bool = False
) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RichReplyError(f"{where} is required")
        return None
    if not isinstance(value, str):
        raise RichReplyError(f"{where} must be a string")
    text = value.strip()
    if len(text) > limit:
        notes.append(f"{where} cut to {limit} characters")
        return text[: limit - 1].rstrip() + _ELLIPSIS
    return text


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise RichReplyError(f"{where} must be an http(s) URL")
    if len(value) > MAX_URL or any(c.isspace() for c in value):
        raise RichReplyError(f"{where} must be at most {MAX_URL} characters, without spaces")
    return value


def _list(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RichReplyError(f"{where} must be a list")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RichReplyError(f"{where} must be an object")
    return value


def _embed_chars(embed: Embed) -> int:
    parts = [embed.title or "", embed.description or ""]
    parts += [f.name + f.value for f in embed.fields]
    return sum(len(p) for p in parts)


def _present(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != () and v is not False}
