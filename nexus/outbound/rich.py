"""A rich reply in each platform's own form: an inline keyboard, Block Kit, Discord embeds
and components, or plain lines appended to the text where the platform has none (pure)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from nexus.engine.rich import Button, Embed, ReplyAttachment, RichReply
from nexus.outbound.chunking import chunk
from nexus.outbound.markup import render

# What each format shows natively; everything else becomes lines of text.
NATIVE_BUTTONS = frozenset({"telegram", "slack", "discord"})
NATIVE_EMBEDS = frozenset({"slack", "discord"})
SLACK_SECTION_LIMIT = 3000  # a section block's text
CHOICES_HEADING = "Reply with one of:"
DISCORD_PRIMARY, DISCORD_LINK = 1, 5  # button styles
DISCORD_ACTION_ROW, DISCORD_BUTTON = 1, 2  # component types
# Formats that send a reply's attachments as files of their own; elsewhere they are links.
# WhatsApp sends a link for the platform to fetch; iMessage (BlueBubbles) gets the file
# uploaded, so its sender downloads it first.
NATIVE_ATTACHMENTS = frozenset({"whatsapp", "imessage"})
# WhatsApp Cloud API interactive messages: up to 3 reply buttons (titles of 20 characters,
# a body of 1024), or a list of up to 10 rows (titles of 24, a body of 4096) behind a
# button. Choices beyond that are numbered lines, as on platforms without buttons.
WHATSAPP_BUTTONS, WHATSAPP_BUTTON_TITLE, WHATSAPP_BUTTON_BODY = 3, 20, 1024
WHATSAPP_ROWS, WHATSAPP_ROW_TITLE, WHATSAPP_LIST_BODY = 10, 24, 4096
WHATSAPP_LIST_BUTTON = "Choose"
# Voice notes want OGG/Opus; other audio goes as a plain audio message.
VOICE_TYPES = frozenset({"audio/ogg", "audio/opus"})
VOICE_SUFFIXES = (".ogg", ".opus", ".oga")


def with_fallback(fmt: str, text: str, rich: RichReply) -> str:
    """The reply's text with what `fmt` cannot show natively appended as plain lines."""
    native_choices = fmt in NATIVE_BUTTONS or (fmt == "whatsapp" and whatsapp_choices_fit(rich))
    lines = fallback_lines(
        rich,
        embeds=fmt not in NATIVE_EMBEDS,
        buttons=not native_choices,
        # WhatsApp's interactive messages carry choices only: its links stay lines.
        links=fmt not in NATIVE_BUTTONS,
        attachments=fmt not in NATIVE_ATTACHMENTS,
    )
    return f"{text}\n\n{lines}" if lines else text


def fallback_lines(
    rich: RichReply,
    *,
    embeds: bool = True,
    buttons: bool = True,
    links: bool | None = None,
    attachments: bool = True,
) -> str:
    """Embeds as title / description / field / link lines; choices as a numbered list;
    link buttons as `label: url` (`links` follows `buttons` unless given); attachments as
    `name: url`."""
    blocks: list[str] = []
    if embeds:
        blocks += [_embed_lines(embed) for embed in rich.embeds]
    choices = rich.choices
    if buttons and choices:
        numbered = [f"{n}. {b.label}" for n, b in enumerate(choices, start=1)]
        blocks.append("\n".join([CHOICES_HEADING, *numbered]))
    found = [f"{b.label}: {b.url}" for row in rich.buttons for b in row if b.url]
    if (buttons if links is None else links) and found:
        blocks.append("\n".join(found))
    if attachments and rich.attachments:
        blocks.append("\n".join(f"{a.name or a.kind}: {a.url}" for a in rich.attachments))
    return "\n\n".join(blocks)


def native_parts(fmt: str, rich: RichReply, rendered_text: str) -> dict[str, Any]:
    """What the last chunk's target carries for its sender to put in the API body."""
    if fmt == "telegram" and rich.buttons:
        return {"reply_markup": telegram_keyboard(rich)}
    if fmt == "slack":
        return {"blocks": slack_blocks(rich, rendered_text)}
    if fmt == "discord":
        parts: dict[str, Any] = {}
        if rich.embeds:
            parts["embeds"] = [discord_embed(embed) for embed in rich.embeds]
        if rich.buttons:
            parts["components"] = discord_components(rich)
        return parts
    if fmt == "webhook":
        return {"rich": rich.to_json()}  # a program on the other end may do better than lines
    if fmt == "whatsapp" and whatsapp_choices_fit(rich):
        return {"interactive": whatsapp_interactive(rich, rendered_text)}
    return {}


def attachment_targets(fmt: str, rich: RichReply) -> list[dict[str, Any]]:
    """What each of the reply's files adds to its own delivery's target, after the text's
    chunks (empty where `fmt` shows attachments as links in the text)."""
    if fmt == "whatsapp":
        return [{"media": whatsapp_media(attachment)} for attachment in rich.attachments]
    if fmt == "imessage":
        return [{"file": imessage_file(attachment)} for attachment in rich.attachments]
    return []


# -- iMessage --------------------------------------------------------------------------------


def imessage_file(attachment: ReplyAttachment) -> dict[str, Any]:
    """What the BlueBubbles sender downloads and uploads: the URL, the file's name (the
    one given, else the URL's last path segment, else the kind) and its type if known."""
    return {
        "url": attachment.url,
        "name": attachment.name or _url_name(attachment.url) or attachment.kind,
        "mime_type": attachment.mime_type,
    }


def _url_name(url: str) -> str | None:
    last = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    return unquote(last) or None


# -- WhatsApp --------------------------------------------------------------------------------


def whatsapp_choices_fit(rich: RichReply) -> bool:
    """The choices fit one interactive message: a list at most (link buttons are lines)."""
    choices = rich.choices
    return 0 < len(choices) <= WHATSAPP_ROWS and all(
        len(b.label) <= WHATSAPP_ROW_TITLE for b in choices
    )


def whatsapp_interactive(rich: RichReply, body: str) -> dict[str, Any]:
    """Reply buttons when the choices and the body fit them, else a list (the sender puts
    the delivery's text in as the body)."""
    choices = rich.choices
    buttons_fit = len(choices) <= WHATSAPP_BUTTONS and len(body) <= WHATSAPP_BUTTON_BODY
    if buttons_fit and all(len(b.label) <= WHATSAPP_BUTTON_TITLE for b in choices):
        return {
            "type": "button",
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": b.value, "title": b.label}} for b in choices
                ]
            },
        }
    return {
        "type": "list",
        "action": {
            "button": WHATSAPP_LIST_BUTTON,
            "sections": [{"rows": [{"id": b.value, "title": b.label} for b in choices]}],
        },
    }


def whatsapp_media(attachment: ReplyAttachment) -> dict[str, Any]:
    """A file as a WhatsApp media message by link: OGG/Opus audio as a voice note."""
    media: dict[str, Any] = {"type": attachment.kind, "link": attachment.url}
    if attachment.kind == "audio" and _is_voice(attachment):
        media["voice"] = True
    if attachment.kind == "document" and attachment.name:
        media["filename"] = attachment.name
    return media


def _is_voice(attachment: ReplyAttachment) -> bool:
    if attachment.mime_type is not None:
        return attachment.mime_type.split(";", 1)[0].strip() in VOICE_TYPES
    path = attachment.url.split("?", 1)[0].split("#", 1)[0].lower()
    return path.endswith(VOICE_SUFFIXES)


def telegram_keyboard(rich: RichReply) -> dict[str, Any]:
    return {"inline_keyboard": [[_telegram_button(b) for b in row] for row in rich.buttons]}


def slack_blocks(rich: RichReply, rendered_text: str) -> list[dict[str, Any]]:
    """The chunk's text as sections (a message with blocks shows only them), then each
    embed, then a row of buttons per actions block."""
    blocks = [_section(piece) for piece in chunk(rendered_text, SLACK_SECTION_LIMIT)]
    for embed in rich.embeds:
        blocks += _slack_embed(embed)
    for r, row in enumerate(rich.buttons):
        blocks.append(
            {
                "type": "actions",
                "block_id": f"nexus_row_{r}",
                "elements": [_slack_button(b, f"nexus_{r}_{c}") for c, b in enumerate(row)],
            }
        )
    return blocks


def discord_embed(embed: Embed) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in ("title", "description", "url"):
        if getattr(embed, key):
            found[key] = getattr(embed, key)
    if embed.fields:
        found["fields"] = [
            {"name": f.name, "value": f.value, "inline": f.inline} for f in embed.fields
        ]
    if embed.image_url:
        found["image"] = {"url": embed.image_url}
    return found


def discord_components(rich: RichReply) -> list[dict[str, Any]]:
    return [
        {"type": DISCORD_ACTION_ROW, "components": [_discord_button(b) for b in row]}
        for row in rich.buttons
    ]


# -- pieces ----------------------------------------------------------------------------------


def _embed_lines(embed: Embed) -> str:
    lines = [line for line in (embed.title, embed.description) if line]
    lines += [f"{f.name}: {f.value}" for f in embed.fields]
    lines += [url for url in (embed.url, embed.image_url) if url]
    return "\n".join(lines)


def _telegram_button(button: Button) -> dict[str, str]:
    if button.url:
        return {"text": button.label, "url": button.url}
    return {"text": button.label, "callback_data": button.value or ""}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _slack_embed(embed: Embed) -> list[dict[str, Any]]:
    head = ""
    if embed.title:
        title = _slack_escape(embed.title)
        head = f"*<{embed.url}|{title}>*" if embed.url else f"*{title}*"
    body = render("slack", embed.description).text if embed.description else ""
    pieces = chunk(f"{head}\n{body}".strip() if head else body, SLACK_SECTION_LIMIT)
    blocks = [_section(piece) for piece in pieces]
    if embed.fields:
        # On the embed's last section, not a block of their own: a message holds 50 blocks,
        # and ten embeds with five rows of buttons must fit.
        blocks[-1]["fields"] = [
            {"type": "mrkdwn", "text": f"*{_slack_escape(f.name)}*\n{_slack_escape(f.value)}"}
            for f in embed.fields
        ]
    if embed.image_url:
        blocks.append(
            {"type": "image", "image_url": embed.image_url, "alt_text": embed.title or "image"}
        )
    return blocks


def _slack_button(button: Button, action_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": button.label},
        "action_id": action_id,
    }
    if button.url:
        found["url"] = button.url
    else:
        found["value"] = button.value
    return found


def _discord_button(button: Button) -> dict[str, Any]:
    if button.url:
        return {"type": DISCORD_BUTTON, "style": DISCORD_LINK, "label": button.label,
                "url": button.url}  # fmt: skip
    return {"type": DISCORD_BUTTON, "style": DISCORD_PRIMARY, "label": button.label,
            "custom_id": button.value}  # fmt: skip


def _slack_escape(text: str) -> str:
    # The three characters Slack's mrkdwn wants escaped; the rest is shown as written.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
