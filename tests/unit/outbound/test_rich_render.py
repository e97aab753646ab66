"""One rich reply, each platform's own payload: exact, so a platform never sees a surprise."""

from __future__ import annotations

from typing import Any

from nexus.engine.rich import RichReply, parse_rich
from nexus.outbound.rich import (
    attachment_targets,
    fallback_lines,
    native_parts,
    slack_blocks,
    whatsapp_choices_fit,
    whatsapp_interactive,
    with_fallback,
)

RICH = parse_rich(
    {
        "buttons": [
            [{"label": "Pay now", "value": "pay"}, {"label": "Later", "value": "later"}],
            [{"label": "Invoice PDF", "url": "https://example.com/i/42.pdf"}],
        ],
        "embeds": [
            {
                "title": "Invoice <42>",
                "description": "Due **Friday**",
                "url": "https://example.com/i/42",
                "fields": [{"name": "Total", "value": "€120", "inline": True}],
                "image_url": "https://example.com/i/42.png",
            }
        ],
    }
)
BUTTONS_ONLY = parse_rich({"buttons": [{"label": "Yes", "value": "yes"}]})


def test_telegram_gets_an_inline_keyboard_and_the_embed_as_lines() -> None:
    assert native_parts("telegram", RICH, "ignored") == {
        "reply_markup": {
            "inline_keyboard": [
                [
                    {"text": "Pay now", "callback_data": "pay"},
                    {"text": "Later", "callback_data": "later"},
                ],
                [{"text": "Invoice PDF", "url": "https://example.com/i/42.pdf"}],
            ]
        }
    }
    assert with_fallback("telegram", "Your invoice.", RICH) == (
        "Your invoice.\n\n"
        "Invoice <42>\nDue **Friday**\nTotal: €120\n"
        "https://example.com/i/42\nhttps://example.com/i/42.png"
    )


def test_telegram_without_buttons_gets_no_keyboard() -> None:
    embed_only = parse_rich({"embeds": [{"title": "Card"}]})
    assert native_parts("telegram", embed_only, "x") == {}


def test_slack_gets_the_text_as_sections_then_the_embed_then_a_row_of_buttons() -> None:
    assert with_fallback("slack", "Your invoice.", RICH) == "Your invoice."
    assert native_parts("slack", RICH, "Your *invoice*.") == {
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "Your *invoice*."}},
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": "*<https://example.com/i/42|Invoice &lt;42&gt;>*\nDue *Friday*",
                },
                "fields": [{"type": "mrkdwn", "text": "*Total*\n€120"}],
            },
            {
                "type": "image",
                "image_url": "https://example.com/i/42.png",
                "alt_text": "Invoice <42>",
            },
            {
                "type": "actions",
                "block_id": "nexus_row_0",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Pay now"},
                        "action_id": "nexus_0_0",
                        "value": "pay",
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Later"},
                        "action_id": "nexus_0_1",
                        "value": "later",
                    },
                ],
            },
            {
                "type": "actions",
                "block_id": "nexus_row_1",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Invoice PDF"},
                        "action_id": "nexus_1_0",
                        "url": "https://example.com/i/42.pdf",
                    },
                ],
            },
        ]
    }


def test_a_slack_text_longer_than_a_section_takes_several() -> None:
    text = ("word " * 500 + "\n\n") * 2  # two paragraphs of 2,500 characters
    sections = [b for b in slack_blocks(BUTTONS_ONLY, text.strip()) if b["type"] == "section"]
    assert len(sections) == 2
    assert all(len(s["text"]["text"]) <= 3000 for s in sections)


def test_discord_gets_embeds_and_action_rows_of_buttons() -> None:
    assert with_fallback("discord", "Your invoice.", RICH) == "Your invoice."
    assert native_parts("discord", RICH, "Your invoice.") == {
        "embeds": [
            {
                "title": "Invoice <42>",
                "description": "Due **Friday**",
                "url": "https://example.com/i/42",
                "fields": [{"name": "Total", "value": "€120", "inline": True}],
                "image": {"url": "https://example.com/i/42.png"},
            }
        ],
        "components": [
            {
                "type": 1,
                "components": [
                    {"type": 2, "style": 1, "label": "Pay now", "custom_id": "pay"},
                    {"type": 2, "style": 1, "label": "Later", "custom_id": "later"},
                ],
            },
            {
                "type": 1,
                "components": [
                    {
                        "type": 2,
                        "style": 5,
                        "label": "Invoice PDF",
                        "url": "https://example.com/i/42.pdf",
                    },
                ],
            },
        ],
    }


def test_text_only_platforms_get_numbered_choices_and_link_lines() -> None:
    expected = (
        "Your invoice.\n\n"
        "Invoice <42>\nDue **Friday**\nTotal: €120\n"
        "https://example.com/i/42\nhttps://example.com/i/42.png\n\n"
        "Reply with one of:\n1. Pay now\n2. Later\n\n"
        "Invoice PDF: https://example.com/i/42.pdf"
    )
    for fmt in ("sms", "email", "webhook"):
        assert with_fallback(fmt, "Your invoice.", RICH) == expected
        assert native_parts(fmt, RICH, expected) == (
            {"rich": RICH.to_json()} if fmt == "webhook" else {}
        )


def test_the_largest_form_fits_in_one_slack_message() -> None:
    # Slack takes at most 50 blocks: ten embeds (one with the longest description, which
    # takes two sections), each with fields and an image, five rows of buttons, the text.
    def embed(description: str) -> dict[str, Any]:
        return {
            "title": "Title",
            "description": description,
            "fields": [{"name": f"n{i}", "value": "v"} for i in range(10)],
            "image_url": "https://example.com/i.png",
        }

    embeds = [embed("word " * 819)] + [embed("short")] * 9
    rows = [[{"label": f"{r}{c}", "value": f"{r}{c}"} for c in range(5)] for r in range(5)]
    largest = parse_rich({"buttons": rows, "embeds": embeds})
    blocks = slack_blocks(largest, "word " * 800)
    assert len(blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")


def test_an_empty_form_adds_nothing() -> None:
    assert fallback_lines(RichReply()) == ""
    assert with_fallback("sms", "Hi.", RichReply()) == "Hi."


# -- WhatsApp: interactive messages and files ------------------------------------------------


def _choices(*labels: str) -> RichReply:
    buttons = [{"label": label, "value": f"v{n}"} for n, label in enumerate(labels)]
    return parse_rich({"buttons": [buttons[i : i + 5] for i in range(0, len(buttons), 5)]})


def test_whatsapp_shows_choices_natively_and_keeps_cards_and_links_as_lines() -> None:
    text = with_fallback("whatsapp", "Your invoice.", RICH)
    assert "Reply with one of:" not in text
    assert text.endswith(
        "https://example.com/i/42.png\n\nInvoice PDF: https://example.com/i/42.pdf"
    )
    parts = native_parts("whatsapp", RICH, text)
    assert parts["interactive"]["type"] == "button"
    assert parts["interactive"]["action"]["buttons"] == [
        {"type": "reply", "reply": {"id": "pay", "title": "Pay now"}},
        {"type": "reply", "reply": {"id": "later", "title": "Later"}},
    ]


def test_whatsapp_buttons_list_or_lines_by_the_platforms_limits() -> None:
    three, four = _choices("a", "b", "c"), _choices("a", "b", "c", "d")
    assert whatsapp_interactive(three, "short")["type"] == "button"
    assert whatsapp_interactive(three, "x" * 1025)["type"] == "list"  # the body is too long
    assert whatsapp_interactive(four, "short")["type"] == "list"
    assert whatsapp_interactive(_choices("a" * 21), "short")["type"] == "list"  # title > 20
    assert whatsapp_choices_fit(_choices(*"abcdefghij"))
    assert not whatsapp_choices_fit(_choices(*"abcdefghijk"))  # 11 rows
    assert not whatsapp_choices_fit(_choices("a" * 25))  # a row title > 24
    eleven = _choices(*"abcdefghijk")
    assert native_parts("whatsapp", eleven, "t") == {}
    assert "Reply with one of:\n1. a" in with_fallback("whatsapp", "t", eleven)


def test_an_ogg_audio_file_is_a_voice_note_and_other_files_plain_media() -> None:
    rich = parse_rich(
        {
            "attachments": [
                {"url": "https://x.example/a.ogg?sig=1", "kind": "audio"},
                {
                    "url": "https://x.example/a",
                    "kind": "audio",
                    "mime_type": "audio/ogg; codecs=opus",
                },
                {"url": "https://x.example/a.mp3", "kind": "audio"},
                {"url": "https://x.example/r.pdf", "kind": "document", "name": "r.pdf"},
            ]
        }
    )
    assert [t["media"] for t in attachment_targets("whatsapp", rich)] == [
        {"type": "audio", "link": "https://x.example/a.ogg?sig=1", "voice": True},
        {"type": "audio", "link": "https://x.example/a", "voice": True},
        {"type": "audio", "link": "https://x.example/a.mp3"},
        {"type": "document", "link": "https://x.example/r.pdf", "filename": "r.pdf"},
    ]
    assert attachment_targets("telegram", rich) == []
    assert with_fallback("telegram", "t", rich).endswith("r.pdf: https://x.example/r.pdf")
    assert with_fallback("whatsapp", "t", rich) == "t"


def test_imessage_attachments_are_files_to_upload_named_by_the_reply_or_the_url() -> None:
    rich = parse_rich(
        {
            "attachments": [
                {"url": "https://x.example/menu.jpg", "kind": "image", "name": "Menu"},
                {"url": "https://x.example/d/r%20q.pdf?sig=1#p", "kind": "document"},
                {
                    "url": "https://x.example/",
                    "kind": "audio",
                    "mime_type": "audio/mp4",
                },
            ]
        }
    )
    assert [t["file"] for t in attachment_targets("imessage", rich)] == [
        {"url": "https://x.example/menu.jpg", "name": "Menu", "mime_type": None},
        {"url": "https://x.example/d/r%20q.pdf?sig=1#p", "name": "r q.pdf", "mime_type": None},
        {"url": "https://x.example/", "name": "audio", "mime_type": "audio/mp4"},
    ]
    assert with_fallback("imessage", "t", rich) == "t"  # no `name: url` lines left behind
