"""Rendering the model's Markdown in each platform's own markup (or as plain text)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from nexus.outbound.chunking import FENCE_LINE


@dataclass(frozen=True)
class Rendered:
    text: str
    parse_mode: str | None  # what the platform must be told to parse it as, if anything


_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<title>\S.*?)(?:[ \t]+#+)?[ \t]*$")
# Spans whose inside is never Markdown: code, links, bare URLs (whose `_` and `*` are
# not emphasis). They are masked out before emphasis is matched, then put back as atoms.
_ATOM = re.compile(
    r"(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>https?://[^\s()<>]+)\)"
    r"|(?P<bare>https?://[^\s<>]*[^\s<>.,;:!?'\")\]*_~])"
)
# Emphasis may not start or end on a space, so `2 * 3 * 4` and list bullets stay literal.
_EMPHASIS = re.compile(
    r"\*\*\*(?P<bold_italic>(?![\s*]).+?(?<![\s*]))\*\*\*"
    r"|\*\*(?P<bold>(?!\s).+?(?<!\s))\*\*"
    r"|~~(?P<strike>(?!\s).+?(?<!\s))~~"
    r"|(?<!\*)\*(?P<star>(?![\s*]).+?(?<![\s*]))\*(?!\*)"
    r"|(?<!\w)_(?P<under>(?![\s_]).+?(?<![\s_]))_(?!\w)"  # not inside snake_case
)
_STYLES: Mapping[str, tuple[str, ...]] = {
    "bold_italic": ("bold", "italic"),
    "bold": ("bold",),
    "strike": ("strike",),
    "star": ("italic",),
    "under": ("italic",),
}
# Deeper nesting than this is rendered literally (and recursion stays bounded).
_MAX_DEPTH = 8


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Code:
    raw: str  # with its backticks
    content: str


@dataclass(frozen=True)
class _Link:
    label: str
    url: str


@dataclass(frozen=True)
class _Styled:
    style: str  # bold, italic or strike
    children: tuple[_Node, ...]


_Node: TypeAlias = _Text | _Code | _Link | _Styled


@dataclass(frozen=True)
class _Dialect:
    parse_mode: str | None
    escape: Callable[[str], str]
    marks: Mapping[str, tuple[str, str]]  # style -> (before, after)
    code: Callable[[_Code], str]
    link: Callable[[_Link], str]
    block: Callable[[str, str], str]  # (language, code) of a fenced block


def render(platform: str, text: str) -> Rendered:
    """`text` (one chunk of the model's Markdown) as `platform` displays it."""
    if platform == "discord":
        return Rendered(text, None)  # Discord speaks the model's Markdown already
    dialect = _DIALECTS.get(platform, _PLAIN)
    return Rendered(_render_lines(text, dialect), dialect.parse_mode)


def _render_lines(text: str, dialect: _Dialect) -> str:
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        opening = FENCE_LINE.fullmatch(lines[index])
        if opening is None:
            out.append(_render_line(lines[index], dialect))
            index += 1
            continue
        # The block runs to the next fence line; an unclosed one runs to the end.
        close = next(
            (i for i in range(index + 1, len(lines)) if FENCE_LINE.fullmatch(lines[i])),
            len(lines),
        )
        info = lines[index].strip()[len(opening.group(1)) :].split()
        language = re.sub(r"[^\w+#.-]", "", info[0]) if info else ""
        out.append(dialect.block(language, "\n".join(lines[index + 1 : close])))
        index = close + 1
    return "\n".join(out)


def _render_line(line: str, dialect: _Dialect) -> str:
    heading = _HEADING.match(line)
    nodes = _InlineParser(heading["title"] if heading else line).parse()
    if heading:
        nodes = (_Styled("bold", nodes),)
    return _emit(nodes, dialect, frozenset())


class _InlineParser:
    """Parses one line: atoms masked by placeholders first, then emphasis, recursively."""

    def __init__(self, line: str) -> None:
        # A placeholder delimiter the line itself never uses, so none can be forged.
        mark = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in line)
        self.atoms: list[_Node] = []
        self.placeholder = re.compile(f"{mark}(\\d+){mark}")
        self.masked = _ATOM.sub(lambda m: f"{mark}{self._stash(m)}{mark}", line)

    def parse(self) -> tuple[_Node, ...]:
        return self._nodes(self.masked, 0)

    def _stash(self, match: re.Match[str]) -> int:
        if match["code"] is not None:
            self.atoms.append(_Code(match[0], match["code"]))
        elif match["url"] is not None:
            self.atoms.append(_Link(match["label"], match["url"]))
        else:
            self.atoms.append(_Text(match["bare"]))
        return len(self.atoms) - 1

    def _nodes(self, text: str, depth: int) -> tuple[_Node, ...]:
        nodes: list[_Node] = []
        while depth < _MAX_DEPTH and (match := _EMPHASIS.search(text)):
            nodes += self._unmask(text[: match.start()])
            kind = next(name for name in _STYLES if match[name] is not None)
            styled = self._nodes(match[kind], depth + 1)
            for style in reversed(_STYLES[kind]):
                styled = (_Styled(style, styled),)
            nodes += styled
            text = text[match.end() :]
        return (*nodes, *self._unmask(text))

    def _unmask(self, text: str) -> list[_Node]:
        nodes: list[_Node] = []
        # split() alternates: text, atom index, text, atom index, ..., text
        for i, part in enumerate(self.placeholder.split(text)):
            if i % 2:
                nodes.append(self.atoms[int(part)])
            elif part:
                nodes.append(_Text(part))
        return nodes


def _emit(nodes: tuple[_Node, ...], dialect: _Dialect, inside: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            parts.append(dialect.escape(node.text))
        elif isinstance(node, _Code):
            parts.append(dialect.code(node))
        elif isinstance(node, _Link):
            parts.append(dialect.link(node))
        else:
            inner = _emit(node.children, dialect, inside | {node.style})
            # Bold inside bold (a heading's **word**) would only garble the markers.
            before, after = ("", "") if node.style in inside else dialect.marks[node.style]
            parts.append(before + inner + after)
    return "".join(parts)


def _html(text: str) -> str:
    return html.escape(text, quote=False)


def _telegram_block(language: str, code: str) -> str:
    attribute = f' class="language-{html.escape(language)}"' if language else ""
    return f"<pre><code{attribute}>{_html(code)}</code></pre>"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text_link(link: _Link) -> str:
    return link.url if link.label == link.url else f"{link.label} ({link.url})"


def _unchanged(text: str) -> str:
    return text


_MRKDWN_MARKS = {"bold": ("*", "*"), "italic": ("_", "_"), "strike": ("~", "~")}

_TELEGRAM = _Dialect(
    parse_mode="HTML",
    escape=_html,
    marks={"bold": ("<b>", "</b>"), "italic": ("<i>", "</i>"), "strike": ("<s>", "</s>")},
    code=lambda code: f"<code>{_html(code.content)}</code>",
    link=lambda link: f'<a href="{html.escape(link.url)}">{_html(link.label)}</a>',
    block=_telegram_block,
)
# Slack and WhatsApp show a fence's info string as a line of code, so it is dropped.
_SLACK = _Dialect(
    parse_mode=None,
    escape=_slack_escape,
    marks=_MRKDWN_MARKS,
    code=lambda code: _slack_escape(code.raw),
    link=lambda link: f"<{link.url.replace('|', '%7C')}|{_slack_escape(link.label)}>",
    block=lambda _language, code: f"```\n{_slack_escape(code)}\n```",
)
_WHATSAPP = _Dialect(
    parse_mode=None,
    escape=_unchanged,
    marks=_MRKDWN_MARKS,
    code=lambda code: code.raw,
    link=_text_link,
    block=lambda _language, code: f"```\n{code}\n```",
)
_PLAIN = _Dialect(
    parse_mode=None,
    escape=_unchanged,
    marks={"bold": ("", ""), "italic": ("", ""), "strike": ("", "")},
    code=lambda code: code.content,
    link=_text_link,
    block=lambda _language, code: code,
)
_DIALECTS: Mapping[str, _Dialect] = {
    "telegram": _TELEGRAM,
    "slack": _SLACK,
    "whatsapp": _WHATSAPP,
    "imessage": _PLAIN,  # no markup at all: `**` would show as typed
}
