"""A GET that reaches only what it may: the URL parsed once, its host resolved once, every
address checked (`nexus.engine.addresses`), and the connection made to a checked address
while the Host header and TLS server name stay the URL's own. A name that answers a public
address to the check and a private one to a second lookup cannot slip through, and
redirects are never followed.

The `http_fetch` tool and the download of a reply's attachments (a URL the model chose)
both fetch through here.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import httpx

from nexus.adapters.capped_read import read_capped
from nexus.engine.addresses import (
    IPAddress,
    NetworkPermissions,
    OwnAddress,
    address_refusal,
)
from nexus.engine.attachments import Fetched

# host, port → the addresses it resolves to (as text), in the resolver's order.
Resolver = Callable[[str, int], Sequence[str]]


class FetchRefused(Exception):
    """The URL may not be fetched (not http(s), a user name in it, an address refused);
    nothing was sent. `reason` is in plain words and names no secret."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FetchFailed(Exception):
    """The fetch was allowed but did not work (no answer in time, an error status, too
    large); `reason` names no URL query. `permanent` when trying again cannot help (too
    large, a 4xx answer)."""

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (an address resolves to itself);
    OSError when it gives none."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def parse_url(text: str) -> httpx.URL:
    """The URL as httpx reads it (the check and the request read it alike), or FetchRefused."""
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, UnicodeError, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise FetchRefused(f"url must be an absolute http:// or https:// URL, not {text[:200]!r}")
    if url.userinfo:
        raise FetchRefused("url must not hold a user name or password (use `credential`)")
    return url


def host_and_port(url: httpx.URL) -> tuple[str, int]:
    return url.raw_host.decode("ascii"), url.port or (443 if url.scheme == "https" else 80)


def as_addresses(found: Sequence[str]) -> list[IPAddress]:
    """The resolver's answers as addresses, or FetchRefused naming one that is none."""
    addresses = []
    for text in found:
        try:
            addresses.append(ipaddress.ip_address(text))
        except ValueError:
            raise FetchRefused(f"the resolver gave {text[:100]!r}, which is no address") from None
    return addresses


@contextmanager
def pinned_stream(
    client: httpx.Client, url: httpx.URL, address: IPAddress, headers: Mapping[str, str]
) -> Iterator[httpx.Response]:
    """GET `url` from the checked `address`: the URL's name stays in Host and TLS (SNI, and
    the certificate is verified against it)."""
    host = url.raw_host.decode("ascii")
    pinned = url.copy_with(host=str(address))
    sent = {"host": url.netloc.decode("ascii"), **headers}
    with client.stream("GET", pinned, headers=sent, extensions={"sni_hostname": host}) as answer:
        yield answer


class PinnedDownloads:
    """Whole files by URL, checked and pinned as above, no larger than `max_bytes` and no
    slower than `timeout_s` in all (a server that trickles bytes is stopped too)."""

    def __init__(
        self,
        *,
        max_bytes: int,
        timeout_s: float,
        network: NetworkPermissions | None = None,
        own: Sequence[OwnAddress] = (),
        resolve: Resolver = system_resolve,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.network = network or NetworkPermissions()
        self.own = tuple(own)
        self._resolve = resolve
        self._transport = transport

    def download(self, text: str) -> Fetched:
        """The file at `text`: FetchRefused before any connection when it may not be
        fetched, FetchFailed when the fetch does not work."""
        url = parse_url(text)
        host, port = host_and_port(url)
        try:
            resolved = self._resolve(host, port)
        except (OSError, UnicodeError) as error:
            raise FetchFailed(f"cannot resolve {host[:200]}: {error}") from None
        addresses = as_addresses(resolved)
        refusal = address_refusal(host, port, addresses, self.network, self.own)
        if refusal is not None:
            raise FetchRefused(refusal)
        try:
            with (
                httpx.Client(
                    timeout=self.timeout_s,
                    follow_redirects=False,
                    trust_env=False,
                    transport=self._transport,
                ) as client,
                pinned_stream(client, url, addresses[0], {"user-agent": "nexus-broker"}) as answer,
            ):
                return self._read(answer)
        except httpx.TimeoutException:
            raise FetchFailed(f"{host[:200]} did not answer in time") from None
        except httpx.HTTPError as error:
            raise FetchFailed(
                f"the download from {host[:200]} failed ({type(error).__name__})"
            ) from None

    def _read(self, answer: httpx.Response) -> Fetched:
        if not answer.is_success:
            status = answer.status_code
            raise FetchFailed(f"the server answered HTTP {status}", permanent=status < 500)
        return read_capped(
            answer,
            max_bytes=self.max_bytes,
            timeout_s=self.timeout_s,
            late="the server did not send the file in time",
            refuse=lambda reason, permanent: FetchFailed(reason, permanent=permanent),
        )
