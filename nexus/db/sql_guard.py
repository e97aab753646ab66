"""What a hook may send as SQL: one read-only query, checked before it reaches a database.

This is the first, readable refusal; the database's read-only transaction (Postgres) or
read-only connection (SQLite) is what enforces it (nexus/db/read_only.py). The check
matters on its own for one thing: a string of several statements, which a driver may send
as one (`SELECT 1; COMMIT; INSERT …` would end the read-only transaction and write).
"""

from __future__ import annotations

import re

# What a query may start with. A data-modifying WITH passes this check and is refused by
# the database instead.
READING = ("select", "with", "values", "table")
_WORD = re.compile(r"[A-Za-z_]+")
_LITERAL = "0"  # what a literal's characters become: code, never a word or a `;`
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


class SqlRefused(ValueError):
    """The SQL is not one read-only query; the message says why."""


def read_only_statement(query: str) -> str:
    """The query without its trailing semicolons; SqlRefused when it is empty, holds more
    than one statement, or does not start as a query does (SELECT, WITH, VALUES, TABLE)."""
    code = _code_only(query)
    trimmed = code.rstrip().rstrip(";").rstrip()
    if ";" in trimmed:
        raise SqlRefused("SQL for hooks runs one statement at a time: remove the `;`")
    first = _WORD.match(trimmed.lstrip().lstrip("(").lstrip())
    if first is None:
        raise SqlRefused("SQL for hooks needs a query (SELECT, WITH, VALUES or TABLE)")
    word = first.group(0).lower()
    if word not in READING:
        raise SqlRefused(
            f"SQL for hooks is read-only: {word.upper()} is not allowed "
            "(a SELECT, WITH, VALUES or TABLE query only)"
        )
    # The original text up to where its code ends (blanking kept every position).
    return query[: len(trimmed)]


def _code_only(query: str) -> str:
    """The query with every string literal and quoted identifier blanked out (each of their
    characters replaced by `0`) and every comment (by spaces), positions kept, as Postgres
    reads them: nested block comments, E'' strings with backslash escapes, dollar quoting.
    What is left is code, where a `;` separates statements. An unterminated literal or
    comment is refused: the database would read the rest differently."""
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c == "-" and query.startswith("--", i):
            end = query.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif c == "/" and query.startswith("/*", i):
            end = _block_comment_end(query, i)
            out.append(" " * (end - i))
            i = end
        elif c == "'":
            escapes = i > 0 and query[i - 1] in "eE" and (i < 2 or not _ident(query[i - 2]))
            end = _quoted_end(query, i, "'", backslash=escapes)
            out.append(_LITERAL * (end - i))
            i = end
        elif c == '"':
            end = _quoted_end(query, i, '"', backslash=False)
            out.append(_LITERAL * (end - i))
            i = end
        elif c == "$" and (i == 0 or not _ident(query[i - 1])):
            tag = _DOLLAR_TAG.match(query, i)
            if tag is None:
                out.append(c)
                i += 1
                continue
            close = query.find(tag.group(0), tag.end())
            if close < 0:
                raise SqlRefused("SQL for hooks: a dollar-quoted string is not closed")
            end = close + len(tag.group(0))
            out.append(_LITERAL * (end - i))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ident(c: str) -> bool:
    return c.isalnum() or c in "_$"


def _block_comment_end(query: str, start: int) -> int:
    depth, i = 0, start
    while i < len(query):
        if query.startswith("/*", i):
            depth += 1
            i += 2
        elif query.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlRefused("SQL for hooks: a /* comment */ is not closed")


def _quoted_end(query: str, start: int, quote: str, *, backslash: bool) -> int:
    i = start + 1
    while i < len(query):
        c = query[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == quote:
            if query.startswith(quote * 2, i):  # a doubled quote is the quote itself
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlRefused(f"SQL for hooks: a {quote}quoted{quote} part is not closed")
