"""Which addresses a tool may reach: public ones, what a persona allows, never our own."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from nexus.engine.addresses import (
    NetworkPermissions,
    address_refusal,
    network_permissions,
    non_public,
    own_addresses,
    url_addresses,
)
from nexus.engine.permissions import read_permissions

NONE = NetworkPermissions()
PUBLIC = "93.184.215.14"


def _refusal(host: str, *addresses: str, port: int = 443, **kw: object) -> str | None:
    found = [ipaddress.ip_address(a) for a in addresses]
    return address_refusal(host, port, found, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("192.0.2.1", "private"),  # documentation range: not public either
    ],
)
def test_every_non_public_address_is_refused_and_says_why(address: str, kind: str) -> None:
    refusal = _refusal("example.com", address, permissions=NONE)
    assert refusal is not None and kind in refusal
    assert str(ipaddress.ip_address(address)) in refusal


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "169.254.170.2"])
def test_cloud_metadata_is_refused_even_when_its_network_is_allowed(address: str) -> None:
    allowed = network_permissions({"allow": ["169.254.0.0/16", "fd00::/8", "metadata.internal"]})
    refusal = _refusal("metadata.internal", address, permissions=allowed)
    assert refusal is not None and "metadata" in refusal


def test_public_addresses_pass_and_one_bad_address_among_good_ones_refuses_all() -> None:
    assert non_public(ipaddress.ip_address(PUBLIC)) is None
    assert _refusal("example.com", PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
                    permissions=NONE) is None  # fmt: skip
    refusal = _refusal("example.com", PUBLIC, "127.0.0.1", permissions=NONE)
    assert refusal is not None and "127.0.0.1" in refusal
    assert _refusal("nothing.example", permissions=NONE) == "nothing.example resolves to no address"


def test_a_persona_may_allow_named_networks_and_hosts() -> None:
    allowed = network_permissions({"allow": ["10.0.0.0/8", "intranet.example.com", "*.corp.test"]})
    assert _refusal("x", "10.9.8.7", permissions=allowed) is None
    assert _refusal("x", "::ffff:10.9.8.7", permissions=allowed) is None
    assert _refusal("x", "192.168.0.1", permissions=allowed) is not None
    assert _refusal("intranet.example.com", "192.168.0.1", permissions=allowed) is None
    assert _refusal("INTRANET.example.com.", "192.168.0.1", permissions=allowed) is None
    assert _refusal("a.b.corp.test", "172.16.0.9", permissions=allowed) is None
    assert _refusal("corp.test", "172.16.0.9", permissions=allowed) is not None  # not *.
    assert _refusal("evilcorp.test", "172.16.0.9", permissions=allowed) is not None


def test_the_deployments_own_addresses_are_refused_whatever_the_persona_allows() -> None:
    own = own_addresses(["10.0.0.5:8000", "flower:5555", "[fd00::5]:9090", "10.0.1.0/24"])
    allowed = network_permissions({"allow": ["10.0.0.0/8", "fd00::/8", "flower"]})
    assert _refusal("api", "10.0.0.5", port=8000, permissions=allowed, own=own) is not None
    assert _refusal("api", "10.0.0.5", port=8001, permissions=allowed, own=own) is None
    refusal = _refusal("flower", "10.0.0.7", port=5555, permissions=allowed, own=own)
    assert refusal is not None and "own address" in refusal
    assert _refusal("m", "fd00::5", port=9090, permissions=allowed, own=own) is not None
    assert _refusal("m", "::ffff:10.0.1.7", port=1, permissions=allowed, own=own) is not None
    assert url_addresses(["http://127.0.0.1:8000", None, "https://bot.example.com/x"]) == [
        "127.0.0.1:8000",
        "bot.example.com:443",
    ]
    api = own_addresses(url_addresses(["https://bot.example.com"]))
    assert _refusal("bot.example.com", PUBLIC, permissions=NONE, own=api) is not None
    with pytest.raises(ValueError, match="http://x/"):
        own_addresses(["http://x/"])


def test_permissions_network_is_read_and_checked_like_the_other_permissions() -> None:
    read = read_permissions({"network": {"allow": ["10.0.0.0/8", "intranet.example.com"]}})
    assert read.network.allow_hosts == ("intranet.example.com",)
    assert read.network.allow_networks == (ipaddress.ip_network("10.0.0.0/8"),)
    assert read_permissions({}).network == NONE
    cases: list[tuple[dict[str, Any], str]] = [
        ({"network": ["10.0.0.0/8"]}, "must be an object"),
        ({"network": {"deny": []}}, "unknown keys: deny"),
        ({"network": {"allow": "10.0.0.0/8"}}, "must be a list"),
        ({"network": {"allow": ["10.0.0.0/33"]}}, "neither a host name"),
        ({"network": {"allow": ["http://x"]}}, "neither a host name"),
        ({"network": {"allow": [f"h{i}.test" for i in range(65)]}}, "more than 64"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            read_permissions(bad)
