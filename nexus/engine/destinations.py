"""Where a credential may be sent: each declares its destinations, and a URL outside them
never gets it. Pure decisions on a URL already parsed by the HTTP client that will send it
(so the check and the request cannot read the URL differently).

A destination is one of:

- `api.github.com`: that host, over https, on port 443, any path;
- `*.github.com`: any host under github.com (not github.com itself), over https, port 443;
- `api.github.com:8443`: that host over https on that port;
- `https://api.github.com/repos/acme/`: a URL prefix: that scheme, host and port, and a path
  at or under it (`/repos/acme/x`, never `/repos/acme-evil`). The only way to allow plain
  http, which anyone on the path can read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from nexus.engine.addresses import host_allowed

DEFAULT_PORTS = {"http": 80, "https": 443}
HOW_TO_DECLARE = (
    "declare where it may go: NEXUS_CREDENTIAL_{ID}_HOSTS=api.example.com,*.example.com, "
    "or `hosts: [...]` beside its `value` in NEXUS_SECRETS_FILE"
)


@dataclass(frozen=True)
class Destination:
    """A request's target: scheme, host (lower case, IDNA, no brackets), port and path."""

    scheme: str
    host: str
    port: int
    path: str


@dataclass(frozen=True)
class Pattern:
    """One declared destination, parsed."""

    scheme: str
    host: str  # a name, "*.suffix", or an address
    port: int
    path: str  # "" for any path


def parse_destination(entry: str) -> Pattern:
    """One declared destination; ValueError saying what is wrong with it."""
    text = entry.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"{text[:100]!r} is not an http:// or https:// URL prefix")
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"{text[:100]!r} must not hold a user or password")
        if parts.query or parts.fragment:
            raise ValueError(f"{text[:100]!r} must not hold a query or fragment")
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError:
            raise ValueError(f"{text[:100]!r} has no valid port") from None
        return Pattern(parts.scheme, parts.hostname.lower().rstrip("."), port, parts.path)
    parts = urlsplit(f"https://{text}")
    if not parts.hostname or parts.path or parts.username is not None or "@" in text:
        raise ValueError(
            f"{text[:100]!r} is not a host (api.example.com, *.example.com, "
            "host:port) or an http(s) URL prefix"
        )
    try:
        port = parts.port or DEFAULT_PORTS["https"]
    except ValueError:
        raise ValueError(f"{text[:100]!r} has no valid port") from None
    return Pattern("https", parts.hostname.lower().rstrip("."), port, "")


def matches(pattern: Pattern, destination: Destination) -> bool:
    if pattern.scheme != destination.scheme or pattern.port != destination.port:
        return False
    if not host_allowed(destination.host, (pattern.host,)):
        return False
    if not pattern.path or pattern.path == "/":
        return True
    prefix = pattern.path if pattern.path.endswith("/") else pattern.path + "/"
    return destination.path == pattern.path.rstrip("/") or destination.path.startswith(prefix)


def credential_refusal(
    credential_id: str, declared: Iterable[str], destination: Destination
) -> str | None:
    """Why the credential may not be sent to `destination` (plain words, no secret), or None."""
    entries = tuple(declared)
    if not entries:
        how = HOW_TO_DECLARE.replace("{ID}", credential_id.upper())
        return (
            f"credential {credential_id!r} declares no hosts it may be sent to, so it is sent "
            f"nowhere (the operator must {how})"
        )
    patterns = []
    for entry in entries:
        try:
            patterns.append(parse_destination(entry))
        except ValueError as error:
            return f"credential {credential_id!r} has a bad destination: {error}"
    if any(matches(pattern, destination) for pattern in patterns):
        return None
    shown = f"{destination.scheme}://{destination.host}:{destination.port}"
    return (
        f"credential {credential_id!r} may not be sent to {shown} "
        f"(it may go only to: {', '.join(e[:100] for e in entries[:10])})"
    )
