"""/docs and /redoc load nothing from a CDN, and the OpenAPI document declares the bearer
scheme on the routes that need a token, so "Try it out" sends one."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings


def _client(database: Database) -> TestClient:
    settings = Settings(api_tokens="tok")
    return TestClient(
        create_app(bootstrap(settings, database=database, doorbell=RecordingDoorbell()))
    )


def _assets(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(
        r"""url:\s*['"]([^'"]+)['"]""", html
    )


def test_the_docs_pages_load_only_local_assets_and_each_answers(database: Database) -> None:
    client = _client(database)
    for page in ("/docs", "/redoc"):
        answer = client.get(page)
        assert answer.status_code == 200, page
        assets = _assets(answer.text)
        assert any(asset.endswith(".js") for asset in assets), (page, assets)
        for asset in assets:
            assert asset.startswith("/") and not asset.startswith("//"), (page, asset)
            assert client.get(asset).status_code == 200, (page, asset)
        assert "cdn" not in answer.text.lower() and "https://" not in answer.text


def test_the_bearer_scheme_is_declared_on_every_route_that_needs_a_token(
    database: Database,
) -> None:
    document = _client(database).get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"]["type"] == "http" and schemes["bearer"]["scheme"] == "bearer"
    unsecured = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            needs_token = path.startswith("/v1/") and (
                not path.startswith("/v1/inbound/") or path == "/v1/inbound/files"
            )
            secured = {"bearer": []} in operation.get("security", [])
            if needs_token != secured:
                unsecured.append((method, path, secured))
    assert unsecured == []
