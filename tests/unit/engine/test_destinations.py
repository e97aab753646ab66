"""Where a credential may be sent: only to the destinations it declares."""

from __future__ import annotations

import pytest

from nexus.engine.destinations import Destination, credential_refusal, parse_destination


def _to(url: str) -> Destination:
    scheme, rest = url.split("://", 1)
    netloc, _, path = rest.partition("/")
    host, _, port = netloc.rpartition(":") if netloc.count(":") == 1 else (netloc, "", "")
    return Destination(scheme, host, int(port or (443 if scheme == "https" else 80)), "/" + path)


@pytest.mark.parametrize(
    ("declared", "url", "allowed"),
    [
        ("api.github.com", "https://api.github.com/user", True),
        ("api.github.com", "http://api.github.com/user", False),  # a host means https
        ("api.github.com", "https://api.github.com:8443/user", False),
        ("api.github.com", "https://evil.com/api.github.com", False),
        ("api.github.com", "https://api.github.com.evil.com/", False),
        ("API.GitHub.com", "https://api.github.com/", True),
        ("*.github.com", "https://uploads.github.com/x", True),
        ("*.github.com", "https://github.com/x", False),
        ("*.github.com", "https://evilgithub.com/x", False),
        ("api.github.com:8443", "https://api.github.com:8443/x", True),
        ("https://api.github.com/repos/acme/", "https://api.github.com/repos/acme/x", True),
        ("https://api.github.com/repos/acme", "https://api.github.com/repos/acme", True),
        ("https://api.github.com/repos/acme", "https://api.github.com/repos/acme-evil", False),
        ("https://api.github.com/repos/acme", "https://api.github.com/user", False),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/anything", True),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8081/anything", False),
        ("http://127.0.0.1:8080/", "https://127.0.0.1:8080/", False),
    ],
)
def test_a_credential_goes_only_where_it_is_declared(
    declared: str, url: str, allowed: bool
) -> None:
    refusal = credential_refusal("github", [declared], _to(url))
    assert (refusal is None) is allowed
    if refusal is not None:
        assert "may not be sent to" in refusal and declared in refusal


def test_a_credential_that_declares_nowhere_goes_nowhere_and_says_how_to_declare() -> None:
    refusal = credential_refusal("github", [], _to("https://api.github.com/"))
    assert refusal is not None
    assert "declares no hosts" in refusal and "NEXUS_CREDENTIAL_GITHUB_HOSTS" in refusal


@pytest.mark.parametrize(
    "bad", ["ftp://x.com/", "https://u:p@x.com/", "x.com/path", "user@x.com", "https://x.com?q"]
)
def test_a_bad_destination_is_named_and_the_credential_not_sent(bad: str) -> None:
    with pytest.raises(ValueError, match=r"URL|host|user|query"):
        parse_destination(bad)
    refusal = credential_refusal("github", [bad], _to("https://x.com/"))
    assert refusal is not None and "bad destination" in refusal
