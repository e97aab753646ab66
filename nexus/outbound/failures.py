"""What a log line may say about a platform's refusal: its HTTP status and a short, clean
excerpt of its answer (never a credential that rode in a URL)."""

from __future__ import annotations

import re

EXCERPT_CHARS = 300
# `HTTP 403: …`, how the HTTP senders describe a platform's answer (adapters/outbound/http).
_STATUS = re.compile(r"^HTTP (\d{3})\b")
# Credentials that travel in URLs: Telegram's /bot<token>/ path, user:password@host, and
# the query parameters BlueBubbles takes its password in.
_BOT_PATH = re.compile(r"/bot[^/\s]+")
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_QUERY_SECRET = re.compile(r"([?&](?:password|guid|token)=)[^&#\s\"']+", re.IGNORECASE)


def http_status(error: str) -> int | None:
    """The platform's HTTP status, when the failure was an HTTP answer."""
    found = _STATUS.match(error)
    return int(found.group(1)) if found else None


STORED_CHARS = 2_000  # of a failure kept on its delivery row, for an operator to read


def excerpt(error: str, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `error`, URL credentials blanked first."""
    clean = _USERINFO.sub("[redacted]@", _BOT_PATH.sub("/bot[redacted]", error))
    clean = _QUERY_SECRET.sub(r"\1[redacted]", clean)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def stored(error: str) -> str:
    """What a delivery row keeps of a failure: the same blanking, a longer bound."""
    return excerpt(error, STORED_CHARS)
