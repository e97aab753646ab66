"""A rich reply in each platform's own form: an inline keyboard, Block Kit, Discord embeds
and components, or plain lines appended to the text where the platform has none (pure)."""

from __future__ import annotations

from typing import Any

from nexus.engine.rich import Button, Embed, RichReply
from nexus.outbound.chunking import chunk
from nexus.outbound.markup import render

# What each format shows natively; everything else becomes lines of text.
NATIVE_BUTTONS = frozenset({"telegram", "slack", "discord"})
NATIVE_EMBEDS = frozenset({"slack", "discord"})
SLACK_SECTION_LIMIT = 3000  # a section block's text
CHOICES_HEADING = "Reply with one of:"
DISCORD_PRIMARY, DISCORD_LINK = 1, 5  # button styles
DISCORD_ACTION_ROW, DISCORD_BUTTON = 1, 2  # component types


def with_fallback(fmt: str, text: str, rich: RichReply) -> str:
    """The reply's text with what `fmt` cannot show natively appended as plain lines."""
    lines = fallback_lines(rich, embeds=fmt not in NATIVE_EMBEDS, buttons=fmt not in NATIVE_BUTTONS)
    return f"{text}\n\n{lines}" if lines else text


def fallback_lines(rich: RichReply, *, embeds: bool = True, buttons: bool = True) -> str:
    """Embeds as title / description / field / link lines; choices as a numbered list;
    link buttons as `label: url`."""
    blocks: list[str] = []
    if embeds:
        blocks += [_embed_lines(embed) for embed in rich.embeds]
    if buttons:
        choices = rich.choices
        if choices:
            numbered = [f"{n}. {b.label}" for n, b in enumerate(choices, start=1)]
            blocks.append("\n".join([CHOICES_HEADING, *numbered]))
        links = [f"{b.label}: {b.url}" for row in rich.buttons for b in row if b.url]
        if links:
            blocks.append("\n".join(links))
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
    return {}


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
