"""Which addresses a tool may connect to: the public internet, a persona's allow list, and
never the deployment itself. Pure decisions on parsed values; the tool resolves and connects.

A fetch is refused when ANY address its host resolves to is refused, so a name cannot hide
one bad address among good ones; the tool then connects to a checked address only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_ALLOWED = 64  # entries in permissions.network.allow

# Cloud instance metadata: they hand out the machine's own credentials, so no allow list
# reaches them (AWS, GCP, Azure, OpenStack: 169.254.169.254; AWS over IPv6: fd00:ec2::254;
# ECS task credentials: 169.254.170.2; Alibaba: 100.100.100.200).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200")
)
CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class NetworkPermissions:
    """A persona's `permissions.network`: hosts and networks reachable although not public."""

    allow_hosts: tuple[str, ...] = ()  # "intranet.example.com" or "*.corp.example.com"
    allow_networks: tuple[IPNetwork, ...] = ()  # a bare address is its own /32 or /128


@dataclass(frozen=True)
class OwnAddress:
    """An address of the deployment itself (its API, Flower, metrics): a host name or a
    network, on one port or (port None) on every port."""

    host: str | None = None
    network: IPNetwork | None = None
    port: int | None = None


def network_permissions(value: Any) -> NetworkPermissions:
    """Read `permissions.network`: `{"allow": ["10.0.0.0/8", "intranet.example.com"]}`."""
    if not isinstance(value, Mapping):
        raise ValueError("permissions.network must be an object with 'allow'")
    unknown = set(value) - {"allow"}
    if unknown:
        raise ValueError(f"permissions.network has unknown keys: {', '.join(sorted(unknown))}")
    allow = value.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(item, str) and item for item in allow):
        raise ValueError("permissions.network.allow must be a list of host names or networks")
    if len(allow) > MAX_ALLOWED:
        raise ValueError(f"permissions.network.allow lists more than {MAX_ALLOWED} entries")
    hosts: list[str] = []
    networks: list[IPNetwork] = []
    for item in allow:
        network = _network(item)
        if network is not None:
            networks.append(network)
        elif _host_pattern(item):
            hosts.append(item.lower())
        else:
            raise ValueError(
                f"permissions.network.allow: {item[:100]!r} is neither a host name "
                "(intranet.example.com, *.corp.example.com) nor an address or network (10.0.0.0/8)"
            )
    return NetworkPermissions(allow_hosts=tuple(hosts), allow_networks=tuple(networks))


def own_addresses(entries: Iterable[str]) -> tuple[OwnAddress, ...]:
    """Read the deployment's own addresses: `host`, `host:port`, an address or network,
    `address:port` or `[v6 address]:port`. A bad entry is a ValueError naming it."""
    found = []
    for entry in entries:
        text, port = _split_port(entry.strip())
        network = _network(text)
        if network is not None:
            found.append(OwnAddress(network=network, port=port))
        elif _host_pattern(text) and "*" not in text:
            found.append(OwnAddress(host=text.lower().rstrip("."), port=port))
        else:
            raise ValueError(f"{entry[:100]!r} is not a host, host:port, address or network")
    return tuple(found)


def url_addresses(urls: Iterable[str | None]) -> list[str]:
    """`host:port` of each URL given (the API's own, say), for `own_addresses`."""
    found = []
    for url in urls:
        parts = urlsplit(url or "")
        if parts.hostname and parts.scheme in ("http", "https"):
            port = parts.port or (443 if parts.scheme == "https" else 80)
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            found.append(f"{host}:{port}")
    return found


def address_refusal(
    host: str,
    port: int,
    addresses: Sequence[IPAddress],
    permissions: NetworkPermissions,
    own: Sequence[OwnAddress] = (),
) -> str | None:
    """Why connecting to `host` (resolved to `addresses`) on `port` is refused, in plain
    words for the model, or None when every address may be reached."""
    if not addresses:
        return f"{host} resolves to no address"
    name = host.lower().rstrip(".")
    for entry in own:
        if entry.host == name and entry.port in (None, port):
            return f"{host} is this deployment's own address; tools may not call it"
    for address in addresses:
        plain = _unwrapped(address)
        if any(_owns(entry, plain, port) or _owns(entry, address, port) for entry in own):
            return f"{host} resolves to {address}, this deployment's own address"
        if plain in METADATA or address in METADATA:
            return f"{host} resolves to {_shown(address)}, a cloud metadata address, never allowed"
    if host_allowed(name, permissions.allow_hosts):
        return None
    for address in addresses:
        plain = _unwrapped(address)
        kind = non_public(plain)
        if kind is None:
            continue
        if any(plain in net or address in net for net in permissions.allow_networks):
            continue
        return (
            f"{host} resolves to {_shown(address)}, {kind}; only public addresses may be fetched "
            "unless the persona's permissions.network.allow names this host or network"
        )
    return None


def non_public(address: IPAddress) -> str | None:
    """What kind of non-public address this is, in words, or None for a public one."""
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in CGNAT:
        return "a carrier-grade NAT address (100.64.0.0/10)"
    if address.is_reserved:  # before private: 240.0.0.0/4 is both
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "not a public address"
    return None


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """`host` is one of the names, or under a `*.suffix` one (never the bare suffix)."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif host == pattern:
            return True
    return False


def _unwrapped(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), so ::ffff:127.0.0.1 is
    judged as 127.0.0.1; otherwise the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.scope_id:
            return ipaddress.IPv6Address(str(address).split("%", 1)[0])
    return address


def _shown(address: IPAddress) -> str:
    plain = _unwrapped(address)
    return str(address) if plain == address else f"{address} ({plain})"


def _owns(entry: OwnAddress, address: IPAddress, port: int) -> bool:
    return entry.network is not None and address in entry.network and entry.port in (None, port)


def _network(text: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


def _host_pattern(text: str) -> bool:
    name = text[2:] if text.startswith("*.") else text
    labels = name.rstrip(".").split(".")
    return 0 < len(name) <= 253 and all(
        label and len(label) <= 63 and all(c.isalnum() or c in "-_" for c in label)
        for label in labels
    )


def _split_port(text: str) -> tuple[str, int | None]:
    if text.startswith("[") and "]:" in text:
        host, _, port = text[1:].partition("]:")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        return text, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text[:100]!r} has no valid port")
    return host, int(port)
