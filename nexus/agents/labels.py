"""A new session's label from a model's `labelHint` (pure): sanitised, prefixed, made unique.

A hint is only a hint. The label it becomes always starts with the kind's prefix (`worker:`
for a new worker, `fork-` for a fork), so a model can never take a label that a platform
key would route to (`dm:…`, `group:…`), and it holds only letters, digits and `. _ : -`,
so it is a valid new label (`check_new_label`: no `/`, no control characters) and reads
well in a URL."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

WORKER_PREFIX = "worker:"
FORK_PREFIX = "fork-"
# Long enough to say what a worker is for, short enough to read in a list.
HINT_LENGTH = 64
# How many numbered labels (`name-2`, `name-3`, …) are tried before the fallback.
NUMBERED_TRIES = 20

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9._:-]+")
_DASHES = re.compile(r"-{2,}")
_EDGES = "-.:_"


def hinted_label(prefix: str, hint: str) -> str | None:
    """`prefix` + the hint made safe: anything but letters, digits and `. _ : -` becomes `-`,
    runs of `-` become one, at most HINT_LENGTH characters of it. None when nothing is left
    (the caller then names the session itself). A hint that already starts with the prefix
    keeps it once."""
    text = unicodedata.normalize("NFKC", hint)
    if text.startswith(prefix):
        text = text[len(prefix) :]
    cleaned = _DASHES.sub("-", _NOT_ALLOWED.sub("-", text)).strip(_EDGES)
    cleaned = cleaned[:HINT_LENGTH].strip(_EDGES)
    return prefix + cleaned if cleaned else None


def first_free(label: str, taken: Callable[[str], bool], fallback: str) -> str:
    """`label` if it is free, else the first free of `label-2` … `label-21`, else
    `label-{fallback}` (the caller passes something unique, such as a new id)."""
    if not taken(label):
        return label
    for number in range(2, NUMBERED_TRIES + 2):
        candidate = f"{label}-{number}"
        if not taken(candidate):
            return candidate
    return f"{label}-{fallback}"
