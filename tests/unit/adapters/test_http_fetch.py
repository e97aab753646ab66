"""`http_fetch` reaches only what it may: every escape to loopback, private networks, cloud
metadata or a host a credential was not issued for fails before a connection is made.
Traffic goes to loopback servers only; other addresses are checked with a resolver stub and
a connect layer that records the attempt and sends nothing."""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from nexus.adapters.http_tool import http_fetch_tool, resolve_host
from nexus.engine.addresses import NetworkPermissions, network_permissions, own_addresses
from nexus.engine.credentials import Secrets
from nexus.engine.tools import ToolContext, ToolFailure

CONTEXT = ToolContext(session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=0)
PUBLIC = "93.184.215.14"
SECRET = "ghp_canary-9d8e7f6a5b"


class Recorder:
    """A loopback HTTP server that records every request it gets; `redirect` makes it
    answer 302 to that URL."""

    def __init__(self, host: str = "127.0.0.1", redirect: str | None = None) -> None:
        self.hits: list[dict[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = {key.lower(): value for key, value in self.headers.items()}
                recorder.hits.append({"path": self.path, **headers})
                if redirect is not None:
                    self.send_response(302)
                    self.send_header("location", redirect)
                else:
                    self.send_response(200)
                    self.send_header("content-type", "text/plain")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: Any) -> None:
                pass

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family})
        self.server = server_class((host, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.close()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every TCP connection httpx tries, recorded and failed at once: no packet is sent."""
    attempts: list[tuple[str, int]] = []

    def create_connection(address: tuple[str, int], *_: Any, **__: Any) -> socket.socket:
        attempts.append((str(address[0]), int(address[1])))
        raise ConnectionRefusedError("recorded, not connected")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return attempts


def _stub(names: dict[str, Sequence[str]]) -> Callable[[str, int], Sequence[str]]:
    """A resolver that knows `names`, and asks the system for anything else."""
    return lambda host, port: names[host] if host in names else resolve_host(host, port)


def _context(
    allow: Sequence[str] = (), credentials: dict[str, tuple[str, Sequence[str]]] | None = None
) -> ToolContext:
    given = credentials or {}
    secrets = Secrets(
        {key: value for key, (value, _) in given.items()},
        {key: tuple(hosts) for key, (_, hosts) in given.items()},
    )
    network = network_permissions({"allow": list(allow)}) if allow else NetworkPermissions()
    return dataclasses.replace(CONTEXT, network=network, credentials=secrets)


def _refused(tool_run: Callable[[], object]) -> str:
    with pytest.raises(ToolFailure) as refused:
        tool_run()
    message = str(refused.value)
    assert message.startswith("http_fetch refused: ")
    return message


def test_loopback_is_refused_by_address_and_by_name(server: Recorder) -> None:
    tool = http_fetch_tool()
    for url in (
        f"http://127.0.0.1:{server.port}/",
        f"http://localhost:{server.port}/",
        f"http://127.1:{server.port}/",  # the short form the resolver expands
        f"http://2130706433:{server.port}/",  # 127.0.0.1 as one number
        f"http://[::ffff:127.0.0.1]:{server.port}/",
    ):
        message = _refused(lambda url=url: tool.run({"url": url}, CONTEXT))  # type: ignore[misc]
        assert "loopback" in message, url
    assert server.hits == []


def test_ipv6_loopback_is_refused() -> None:
    try:
        server = Recorder("::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        message = _refused(
            lambda: http_fetch_tool().run({"url": f"http://[::1]:{server.port}/"}, CONTEXT)
        )
        assert "::1" in message and "loopback" in message
        assert server.hits == []
    finally:
        server.close()


def test_a_name_that_resolves_to_loopback_is_refused(server: Recorder) -> None:
    tool = http_fetch_tool(resolve=_stub({"innocent.example": [PUBLIC, "127.0.0.1"]}))
    message = _refused(
        lambda: tool.run({"url": f"http://innocent.example:{server.port}/"}, CONTEXT)
    )
    assert "resolves to 127.0.0.1, a loopback address" in message
    assert server.hits == []


def test_a_redirect_to_loopback_is_not_followed_and_fetching_it_is_refused(
    server: Recorder,
) -> None:
    # A "public" server (loopback, allowed for this persona by name) answers 302 to loopback.
    public = Recorder(redirect=f"http://127.0.0.1:{server.port}/admin")
    try:
        tool = http_fetch_tool(resolve=_stub({"public.test": ["127.0.0.1"]}))
        context = _context(allow=["public.test"])
        answer = tool.run({"url": f"http://public.test:{public.port}/start"}, context)
        assert answer["status"] == 302
        assert answer["location"] == f"http://127.0.0.1:{server.port}/admin"
        assert public.hits[0]["host"] == f"public.test:{public.port}"
        message = _refused(lambda: tool.run({"url": answer["location"]}, context))
        assert "loopback" in message
    finally:
        public.close()
    assert server.hits == []


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.0.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.0.10", "a private address"),
        ("fd12::1", "a private address"),
        ("169.254.10.10", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.1.1", "carrier-grade NAT"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("::ffff:10.0.0.1", "a private address"),
        ("0.0.0.0", "the unspecified address"),
        ("224.0.0.251", "a multicast address"),
    ],
)
def test_non_public_addresses_are_refused_without_a_connection(
    connections: list[tuple[str, int]], address: str, kind: str
) -> None:
    by_name = http_fetch_tool(resolve=_stub({"target.test": [address]}))
    message = _refused(lambda: by_name.run({"url": "http://target.test/"}, CONTEXT))
    assert kind in message
    literal = f"http://[{address}]/" if ":" in address else f"http://{address}/"
    message = _refused(lambda: http_fetch_tool().run({"url": literal}, CONTEXT))
    assert kind in message
    assert connections == []


def test_dns_rebinding_finds_no_second_lookup_the_checked_address_is_connected(
    connections: list[tuple[str, int]],
) -> None:
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [PUBLIC] if len(lookups) == 1 else ["127.0.0.1"]

    with pytest.raises(ToolFailure, match="ConnectError"):
        http_fetch_tool(resolve=rebinding).run({"url": "http://rebind.test:8080/"}, CONTEXT)
    assert lookups == ["rebind.test"]
    assert connections == [(PUBLIC, 8080)]


def test_the_pinned_request_keeps_the_name_in_host_and_tls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, text="hi")

    tool = http_fetch_tool(
        resolve=_stub({"api.example.com": [PUBLIC]}), transport=httpx.MockTransport(answer)
    )
    assert tool.run({"url": "https://api.example.com/x?y=1"}, CONTEXT)["body"] == "hi"
    [request] = sent
    assert str(request.url) == f"https://{PUBLIC}/x?y=1"
    assert request.headers["host"] == "api.example.com"
    assert request.extensions["sni_hostname"] == "api.example.com"


def test_a_credential_for_another_host_is_refused_before_anything_is_sent(
    connections: list[tuple[str, int]],
) -> None:
    counted: list[str] = []
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [PUBLIC]

    tool = http_fetch_tool(resolve=resolver, count=counted.append)
    context = _context(credentials={"github": (SECRET, ["api.github.com", "*.github.com"])})
    with capture_logs() as logs:
        message = _refused(
            lambda: tool.run({"url": "https://evil.example/", "credential": "github"}, context)
        )
        nowhere = _context(credentials={"github": (SECRET, [])})
        unset = _refused(
            lambda: tool.run({"url": "https://api.github.com/", "credential": "github"}, nowhere)
        )
    assert "credential 'github' may not be sent to https://evil.example:443" in message
    assert "NEXUS_CREDENTIAL_GITHUB_HOSTS" in unset
    assert SECRET not in message + unset
    assert connections == [] and lookups == []  # not even a DNS query
    assert counted == ["credential_refused", "credential_refused"]
    [event, _] = logs
    assert event["event"] == "security.credential_refused"
    assert event["log_level"] == "warning"
    assert event["credential"] == "github" and event["host"] == "evil.example"
    assert SECRET not in repr(logs)


def test_a_credential_goes_to_its_declared_host(server: Recorder) -> None:
    tool = http_fetch_tool()
    declared = [f"http://127.0.0.1:{server.port}/api/"]
    context = _context(allow=["127.0.0.1"], credentials={"svc": (SECRET, declared)})
    answer = tool.run(
        {"url": f"http://127.0.0.1:{server.port}/api/me", "credential": "svc"}, context
    )
    assert answer["status"] == 200
    assert server.hits[0]["authorization"] == f"Bearer {SECRET}"
    # The same host outside the declared prefix does not get it.
    _refused(lambda: tool.run({"url": f"http://127.0.0.1:{server.port}/x", "credential": "svc"},
                              context))  # fmt: skip
    assert len(server.hits) == 1


def test_an_allowed_private_network_is_reached_and_others_are_not(
    connections: list[tuple[str, int]],
) -> None:
    counted: list[str] = []
    tool = http_fetch_tool(
        resolve=_stub({"intranet.test": ["10.1.2.3"], "other.test": ["192.168.1.1"]}),
        count=counted.append,
    )
    context = _context(allow=["10.0.0.0/8"])
    with pytest.raises(ToolFailure, match="ConnectError"):
        tool.run({"url": "http://intranet.test:8080/"}, context)
    assert connections == [("10.1.2.3", 8080)]
    _refused(lambda: tool.run({"url": "http://other.test/"}, context))
    assert connections == [("10.1.2.3", 8080)] and counted == ["address_refused"]


def test_the_deployments_own_address_stays_refused_when_the_persona_allows_its_network(
    server: Recorder,
) -> None:
    tool = http_fetch_tool(own=own_addresses([f"127.0.0.1:{server.port}"]))
    message = _refused(
        lambda: tool.run(
            {"url": f"http://127.0.0.1:{server.port}/metrics"}, _context(["127.0.0.0/8"])
        )
    )
    assert "this deployment's own address" in message
    assert server.hits == []


def test_urls_with_a_user_or_another_scheme_are_refused() -> None:
    tool = http_fetch_tool()
    with pytest.raises(ToolFailure, match="user name or password"):
        tool.run({"url": "https://u:p@example.com/"}, CONTEXT)
    with pytest.raises(ToolFailure, match="http:// or https://"):
        tool.run({"url": "gopher://example.com/"}, CONTEXT)
    assert ipaddress.ip_address(PUBLIC).is_global
