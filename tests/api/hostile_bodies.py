"""Generated hostile bodies for every inbound adapter: a valid delivery with some of its
fields swapped for over-long, odd-typed, out-of-range or deeply nested values."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st

from tests.api.inbound_support import CASES, MEDIA_BODIES

DEEP = "\x01deep\x01"  # a marker replaced by nesting too deep to build as Python objects
SURROGATE = "lone \ud800 surrogate"
_long_text = st.text(min_size=256, max_size=1_200)
_ascii_id = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=600)

# Values that look like something a platform could send, yet fit no column as they are.
HOSTILE = st.one_of(
    _long_text,
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([10**40, -1, 2**63, 2**64 + 1, 0]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([SURROGATE, "a\x00b", "\u0663\u0664", "1e400", "", "2024-13-45T99:99"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.just(DEEP),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        found.append((*prefix, key))
        if isinstance(child, dict | list) and child:
            found += _paths(child, (*prefix, key))
    return found


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _dumped(payload: Any, depth: int) -> bytes:
    text = json.dumps(payload)  # escapes the surrogate, as a platform's JSON would
    nested = "[" * depth + "]" * depth
    return text.replace(json.dumps(DEEP), nested).encode()


@st.composite
def json_body(draw: st.DrawFn, name: str, media: bool = False) -> bytes:
    """The adapter's valid body (or its body with attachments) with one to four fields (or
    new keys) made hostile."""
    payload = json.loads(MEDIA_BODIES[name] if media else CASES[name][1])
    paths = _paths(payload)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(paths))
        if draw(st.booleans()) and isinstance(payload, dict):
            path = (*path[:-1], draw(st.sampled_from(["id", "date", "timestamp", "extra"])))
        try:
            _set(payload, path, draw(HOSTILE))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier swap replaced the parent
        paths = _paths(payload)
    return _dumped(payload, draw(st.sampled_from([70, 1_000, 5_000, 100_000])))


_form_value = st.one_of(
    _long_text.filter(lambda s: "\ud800" not in s),
    st.sampled_from(["", "abc", "-1", "99999999999999999999", "\u0663", "%ff"]),
)


@st.composite
def twilio_body(draw: st.DrawFn) -> bytes:
    form = {
        "MessageSid": "SM1",
        "From": "+14155550100",
        "To": "+14155550199",
        "Body": "hi",
        "NumMedia": "2",
        "MediaUrl0": "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
        "MediaContentType0": "image/jpeg",
        "SmsStatus": "received",
    }
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        key = draw(
            st.sampled_from(
                [
                    *form,
                    "MediaUrl0",
                    "MediaContentType0",
                    "MediaUrl9",
                    "MessageStatus",
                    "ProfileName",
                ]
            )
        )
        form[key] = draw(_form_value)
    return urlencode(form).encode("utf-8", "surrogatepass")


_header_value = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FFF), max_size=1_200),
    st.sampled_from(["<>", "< >", "Mon, 99 Foo 99999 99:99:99 +0000", "Sat, 1 Jan 99999 0:0 Z"]),
)


@st.composite
def email_body(draw: st.DrawFn) -> bytes:
    """An RFC 822 message whose Message-ID, Date, From or references run long or odd."""
    headers = {
        "From": "Ada <ada@example.com>",
        "To": "bot@example.com",
        "Message-ID": f"<{draw(st.text(min_size=1, max_size=1_200).map(str.strip))}@example>",
        "Subject": "hi",
        "Date": "Thu, 1 Jan 2026 00:00:00 +0000",
    }
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        key = draw(st.sampled_from([*headers, "In-Reply-To", "References"]))
        headers[key] = draw(_header_value)
    lines = "".join(f"{k}: {' '.join(v.splitlines())}\n" for k, v in headers.items())
    return (lines + "\n" + draw(st.text(max_size=200)) + "\n").encode("utf-8", "surrogatepass")


def body_for(name: str, media: bool = False) -> st.SearchStrategy[bytes]:
    if name == "twilio":
        return twilio_body()
    if name == "email":
        return email_body()
    return json_body(name, media)


# Headers that are themselves ids: the GUID and the Standard Webhooks id, long or odd.
def header_overrides(name: str) -> st.SearchStrategy[dict[str, str]]:
    if name == "github":
        return st.fixed_dictionaries(
            {"X-GitHub-Delivery": _ascii_id.filter(bool), "X-GitHub-Event": _ascii_id.filter(bool)}
        )
    return st.just({})
