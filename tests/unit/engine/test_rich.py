"""The rich reply form: what every platform can show is kept, what none can is refused."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nexus.engine.builtin_tools import builtin_registry
from nexus.engine.rich import (
    Button,
    Embed,
    EmbedField,
    RichReply,
    RichReplyError,
    parse_reaction,
    parse_rich,
)
from nexus.engine.tools import ToolContext, ToolFailure


def _choice(n: int) -> dict[str, str]:
    return {"label": f"Option {n}", "value": f"opt{n}"}


def test_rows_of_choices_and_links_and_an_embed_are_read_as_given() -> None:
    rich = parse_rich(
        {
            "buttons": [
                [{"label": "Yes", "value": "yes"}, {"label": "No", "value": "no"}],
                [{"label": "Docs", "url": "https://example.com/docs"}],
            ],
            "embeds": [
                {
                    "title": "Invoice 42",
                    "description": "Due **Friday**",
                    "url": "https://example.com/i/42",
                    "fields": [{"name": "Total", "value": "€120", "inline": True}],
                    "image_url": "https://example.com/i/42.png",
                }
            ],
        }
    )
    assert rich == RichReply(
        buttons=(
            (Button("Yes", value="yes"), Button("No", value="no")),
            (Button("Docs", url="https://example.com/docs"),),
        ),
        embeds=(
            Embed(
                title="Invoice 42",
                description="Due **Friday**",
                url="https://example.com/i/42",
                fields=(EmbedField("Total", "€120", inline=True),),
                image_url="https://example.com/i/42.png",
            ),
        ),
    )
    assert rich.notes == ()
    assert [b.value for b in rich.choices] == ["yes", "no"]
    assert parse_rich(rich.to_json()) == rich  # what is stored reads back the same


def test_a_flat_list_puts_one_button_on_each_row() -> None:
    rich = parse_rich({"buttons": [_choice(1), _choice(2), _choice(3)]})
    assert [len(row) for row in rich.buttons] == [1, 1, 1]


def test_too_long_text_is_cut_and_said() -> None:
    rich = parse_rich(
        {
            "buttons": [{"label": "L" * 100, "value": "v"}],
            "embeds": [{"title": "T" * 300, "description": "D" * 5000}],
        }
    )
    [[button]] = rich.buttons
    assert len(button.label) == 75 and button.label.endswith("…")
    [embed] = rich.embeds
    assert len(embed.title or "") == 256 and len(embed.description or "") == 4096
    assert rich.notes == (
        "button 1.1 label cut to 75 characters",
        "embed 1 title cut to 256 characters",
        "embed 1 description cut to 4096 characters",
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"buttons": [[_choice(n) for n in range(6)]]}, "row 1 has 6 buttons; at most 5"),
        ({"buttons": [[_choice(n)] for n in range(6)]}, "at most 5 rows of buttons, got 6"),
        ({"buttons": [{"label": "x", "value": "é" * 33}]}, "value is 66 bytes; at most 64"),
        ({"buttons": [{"label": "x"}]}, "needs exactly one of value (a choice) or url"),
        ({"buttons": [{"label": "x", "value": "a", "url": "https://a.b"}]}, "exactly one of"),
        ({"buttons": [{"label": "x", "url": "javascript:alert(1)"}]}, "must be an http(s) URL"),
        ({"buttons": [{"label": "", "value": "a"}]}, "button 1.1 label is required"),
        ({"buttons": [_choice(1), _choice(1)]}, "two buttons have the same value"),
        ({"buttons": [_choice(1), [_choice(2)]]}, "a list of rows (lists) or a list of buttons"),
        ({"buttons": "yes"}, "buttons must be a list"),
        ({"embeds": [{"title": "t"}] * 11}, "at most 10 embeds, got 11"),
        ({"embeds": [{"url": "https://a.b"}]}, "embed 1 needs a title or a description"),
        (
            {"embeds": [{"title": "t", "fields": [{"name": "n", "value": "v"}] * 11}]},
            "embed 1 has 11 fields; at most 10",
        ),
        ({"embeds": [{"description": "d" * 4000}] * 2}, "8000 characters together; at most 6000"),
    ],
)
def test_what_no_platform_can_show_is_refused_with_what_to_change(
    data: dict[str, Any], message: str
) -> None:
    with pytest.raises(RichReplyError, match=_literal(message)):
        parse_rich(data)


def _literal(text: str) -> str:
    import re

    return re.escape(text)


def _context() -> ToolContext:
    return ToolContext(session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=0)


def test_the_present_options_tool_answers_with_the_form_it_attached_and_what_it_cut() -> None:
    tool = builtin_registry().get("present_options")
    assert tool is not None
    answer = tool.run({"buttons": [{"label": "Y" * 80, "value": "yes"}]}, _context())
    assert answer["attached"] == {"buttons": [[{"label": "Y" * 74 + "…", "value": "yes"}]],
                                  "embeds": []}  # fmt: skip
    assert answer["cut"] == ["button 1.1 label cut to 75 characters"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({}, "give at least one button or embed"), ({"buttons": [{"label": "x"}]}, "exactly one")],
)
def test_the_present_options_tool_refuses_to_the_model(
    arguments: dict[str, Any], message: str
) -> None:
    tool = builtin_registry().get("present_options")
    assert tool is not None
    with pytest.raises(ToolFailure, match=message):
        tool.run(arguments, _context())


def test_reply_attachments_are_checked_and_kept_in_the_form() -> None:
    voice = {"url": "https://x.example/a.ogg", "kind": "audio", "mime_type": "Audio/OGG"}
    rich = parse_rich({"attachments": [voice]})
    assert not rich.empty
    assert rich.to_json()["attachments"] == [{**voice, "mime_type": "audio/ogg"}]
    assert parse_rich(rich.to_json()) == rich
    assert "attachments" not in parse_rich({"buttons": [{"label": "a", "value": "a"}]}).to_json()
    for bad, says in (
        ({"url": "https://x.example/a", "kind": "sticker"}, "kind must be one of"),
        ({"url": "ftp://x.example/a", "kind": "audio"}, "must be an http(s) URL"),
        ({"url": "https://x.example/a", "kind": "audio", "mime_type": "ogg"}, "mime_type"),
    ):
        with pytest.raises(RichReplyError, match=re.escape(says)):
            parse_rich({"attachments": [bad]})
    with pytest.raises(RichReplyError, match="at most 10 attachments"):
        parse_rich({"attachments": [{"url": "https://x.example/a", "kind": "image"}] * 11})


def test_the_react_tool_takes_a_tapback_and_refuses_anything_else() -> None:
    tool = builtin_registry().get("react")
    assert tool is not None
    assert tool.run({"reaction": " Love "}, _context())["reaction"] == "love"
    for bad in ({}, {"reaction": "wow"}, {"reaction": 1}):
        with pytest.raises(ToolFailure, match="reaction must be one of love, like"):
            tool.run(bad, _context())
    assert parse_reaction("question") == "question"
