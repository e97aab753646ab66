"""Markup: the model's Markdown as Telegram HTML, Slack mrkdwn, WhatsApp, Discord, plain text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus.outbound.chunking import chunk
from nexus.outbound.markup import Rendered, render

SAMPLE = "\n".join(
    [
        "# Title with **bold**",
        "Some **bold**, *it*, _it_, ~~gone~~ and `**code** & <b>` here.",
        '[docs](https://ex.com/?a=1&b="2") and a < b && c > d',
        "```python",
        "if a < b and **x**:",
        "    pass",
        "```",
        "snake_case_name, 2 * 3 * 4, **unmatched and *lone",
        "* a bullet, http://x.com/_a_/b_ and ***both***",
    ]
)


def test_telegram_html() -> None:
    assert render("telegram", SAMPLE) == Rendered(
        "\n".join(
            [
                "<b>Title with bold</b>",
                "Some <b>bold</b>, <i>it</i>, <i>it</i>, <s>gone</s> and "
                "<code>**code** &amp; &lt;b&gt;</code> here.",
                '<a href="https://ex.com/?a=1&amp;b=&quot;2&quot;">docs</a> and '
                "a &lt; b &amp;&amp; c &gt; d",
                '<pre><code class="language-python">if a &lt; b and **x**:',
                "    pass</code></pre>",
                "snake_case_name, 2 * 3 * 4, **unmatched and *lone",
                "* a bullet, http://x.com/_a_/b_ and <b><i>both</i></b>",
            ]
        ),
        "HTML",
    )


def test_slack_mrkdwn() -> None:
    assert render("slack", SAMPLE) == Rendered(
        "\n".join(
            [
                "*Title with bold*",
                "Some *bold*, _it_, _it_, ~gone~ and `**code** &amp; &lt;b&gt;` here.",
                '<https://ex.com/?a=1&b="2"|docs> and a &lt; b &amp;&amp; c &gt; d',
                "```",
                "if a &lt; b and **x**:",
                "    pass",
                "```",
                "snake_case_name, 2 * 3 * 4, **unmatched and *lone",
                "* a bullet, http://x.com/_a_/b_ and *_both_*",
            ]
        ),
        None,
    )


def test_whatsapp() -> None:
    assert render("whatsapp", SAMPLE) == Rendered(
        "\n".join(
            [
                "*Title with bold*",
                "Some *bold*, _it_, _it_, ~gone~ and `**code** & <b>` here.",
                'docs (https://ex.com/?a=1&b="2") and a < b && c > d',
                "```",
                "if a < b and **x**:",
                "    pass",
                "```",
                "snake_case_name, 2 * 3 * 4, **unmatched and *lone",
                "* a bullet, http://x.com/_a_/b_ and *_both_*",
            ]
        ),
        None,
    )


@pytest.mark.parametrize("platform", ["sms", "imessage", "email", "something-new"])
def test_plain_text(platform: str) -> None:
    assert render(platform, SAMPLE) == Rendered(
        "\n".join(
            [
                "Title with bold",
                "Some bold, it, it, gone and **code** & <b> here.",
                'docs (https://ex.com/?a=1&b="2") and a < b && c > d',
                "if a < b and **x**:",
                "    pass",
                "snake_case_name, 2 * 3 * 4, **unmatched and *lone",
                "* a bullet, http://x.com/_a_/b_ and both",
            ]
        ),
        None,
    )


def test_discord_takes_the_markdown_as_it_is() -> None:
    assert render("discord", SAMPLE) == Rendered(SAMPLE, None)


@pytest.mark.parametrize(
    ("markdown", "telegram", "slack"),
    [
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d", "a &lt; b &amp;&amp; c &gt; d"),
        ("`**x** <y>`", "<code>**x** &lt;y&gt;</code>", "`**x** &lt;y&gt;`"),
        ("``a ` b``", "<code>a ` b</code>", "``a ` b``"),
        ("**see `x**y`**", "<b>see <code>x**y</code></b>", "*see `x**y`*"),
        ("```\n*x* & y\n```", "<pre><code>*x* &amp; y</code></pre>", "```\n*x* &amp; y\n```"),
        (
            "```sh\nunclosed",
            '<pre><code class="language-sh">unclosed</code></pre>',
            "```\nunclosed\n```",
        ),
        (
            "[a *b*](https://x.io/a_b_c)",
            '<a href="https://x.io/a_b_c">a *b*</a>',
            "<https://x.io/a_b_c|a *b*>",
        ),
        (
            "[a](https://x.io/?q=a|b)",
            '<a href="https://x.io/?q=a|b">a</a>',
            "<https://x.io/?q=a%7Cb|a>",
        ),
        ("[not a link](ftp://x)", "[not a link](ftp://x)", "[not a link](ftp://x)"),
        ("**unmatched", "**unmatched", "**unmatched"),
        ("*lone and **half*", "<i>lone and **half</i>", "_lone and **half_"),
        ("** spaced **", "** spaced **", "** spaced **"),
        ("__init__ and snake_case", "__init__ and snake_case", "__init__ and snake_case"),
        ("*a **b** c*", "<i>a <b>b</b> c</i>", "_a *b* c_"),
        ("## Heading ##", "<b>Heading</b>", "*Heading*"),
        ("#hashtag", "#hashtag", "#hashtag"),
        ("~~a~~ ~b~", "<s>a</s> ~b~", "~a~ ~b~"),
    ],
)
def test_telegram_and_slack_details(markdown: str, telegram: str, slack: str) -> None:
    assert render("telegram", markdown).text == telegram
    assert render("slack", markdown).text == slack


@pytest.mark.parametrize(
    ("markdown", "whatsapp", "plain"),
    [
        ("[docs](https://x.io)", "docs (https://x.io)", "docs (https://x.io)"),
        ("[https://x.io](https://x.io)", "https://x.io", "https://x.io"),
        ("```js\nlet a = **b**\n```", "```\nlet a = **b**\n```", "let a = **b**"),
        ("use `**x**` now", "use `**x**` now", "use **x** now"),
        ("### Step *one*", "*Step _one_*", "Step one"),
    ],
)
def test_whatsapp_and_plain_details(markdown: str, whatsapp: str, plain: str) -> None:
    assert render("whatsapp", markdown).text == whatsapp
    assert render("sms", markdown).text == plain


class _TagChecker(HTMLParser):
    """Telegram's rules: known tags only, each closed in order, nothing inside code."""

    ALLOWED = frozenset({"b", "i", "s", "code", "pre", "a"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        parent = self.stack[-1] if self.stack else None
        assert tag in self.ALLOWED, tag
        assert parent not in {"code", "a"}, (self.stack, tag)
        assert parent != "pre" or tag == "code", (self.stack, tag)
        assert tag != "pre" or parent is None, (self.stack, tag)
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()


def _assert_balanced_html(text: str) -> None:
    checker = _TagChecker()
    checker.feed(text)
    checker.close()
    assert checker.stack == []
    # Every < and > left is one of our tags: the rest was escaped.
    assert not re.search(r"[<>]", re.sub(r"</?(?:b|i|s|code|pre|a)(?: [^<>]*)?>", "", text))


_MARKDOWNISH = st.lists(
    st.sampled_from(
        [
            *"ab *_~`#[]()<>&\"'\n ",
            *["**", "~~", "```", "```py\n", "\n```\n", "# ", "http://x.y/_"],
            *["[l](http://u.v/a_b)", "`c`"],
        ]
    )
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_MARKDOWNISH)
def test_telegram_tags_are_always_balanced_and_nested(text: str) -> None:
    _assert_balanced_html(render("telegram", text).text)


def test_chunks_of_a_long_fenced_reply_each_render_balanced() -> None:
    code = "\n".join(f"print('<{n}>' + **kwargs)  # **not bold**" for n in range(120))
    reply = f"Intro with **bold**.\n\n```python\n{code}\n```\n\nDone & _dusted_."
    pieces = chunk(reply, 1000)
    assert len(pieces) > 3
    for piece in pieces:
        html = render("telegram", piece).text
        _assert_balanced_html(html)
        assert "<b>not bold</b>" not in html
    assert render("telegram", pieces[1]).text.startswith('<pre><code class="language-python">')
