"""/ui: the console's page and assets are served without a token, from the package, and
refer to nothing off this server; /v1 stays as closed as it was."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.api.console import STATIC
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.settings import Settings


def _client(database: Database) -> TestClient:
    return TestClient(create_app(bootstrap(Settings(api_tokens="tok"), database=database)))


def test_the_console_is_served_without_a_token_and_v1_still_needs_one(
    database: Database,
) -> None:
    client = _client(database)
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/ui/static/console.js">' in page.text
    # Only this server's scripts run, and no other site frames the page.
    assert page.headers["content-security-policy"].startswith("default-src 'self';")
    script = client.get("/ui/static/console.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert client.get("/ui/static/console.css").status_code == 200
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui"
    assert client.get("/ui/static/nothing.js").status_code == 404
    assert client.get("/ui/static/../__init__.py").status_code == 404
    assert client.get("/v1/sessions").status_code == 401
    assert "/ui" not in client.get("/openapi.json").json()["paths"]


def test_the_console_loads_nothing_from_elsewhere() -> None:
    """Offline: no CDN, no font or script from another origin."""
    for asset in ("index.html", "console.js", "console.css"):
        text = (STATIC / asset).read_text(encoding="utf-8")
        # The SVG namespace is a name, not a fetch.
        found = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not found, (asset, found)
