"""The API is typed: every route declares what it answers, and routes take their services
as dependencies rather than reaching into the app."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

API = Path(__file__).resolve().parents[2] / "nexus" / "api"
# These answer raw responses on purpose, each documented in OpenAPI through `responses`:
# a platform's own handshake bytes, an event stream, Prometheus text.
RAW = {
    ("POST", "/v1/inbound/{adapter}"),
    ("GET", "/v1/inbound/{adapter}"),
    ("GET", "/v1/sessions/{label}/stream"),
    ("GET", "/metrics"),
}


def _routes(database: Database) -> list[APIRoute]:
    app = create_app(bootstrap(Settings(), database=database, doorbell=RecordingDoorbell()))
    found: list[APIRoute] = []
    pending: list[object] = list(app.routes)
    while pending:
        route = pending.pop()
        if isinstance(route, APIRoute):
            if route.include_in_schema:  # not the /docs and /redoc pages
                found.append(route)
        elif hasattr(route, "original_router"):  # an included router
            pending.extend(route.original_router.routes)
        elif hasattr(route, "routes"):
            pending.extend(route.routes)
    assert len(found) > 30  # every resource's routes were found
    return found


def _key(route: APIRoute) -> set[tuple[str, str]]:
    path = route.path.replace("{label:path}", "{label}").replace("{event_id:path}", "{event_id}")
    return {(method, path) for method in route.methods or ()}


def test_every_route_has_a_response_model_but_the_raw_ones(database: Database) -> None:
    untyped: set[tuple[str, str]] = set()
    dicts: set[tuple[str, str]] = set()
    for route in _routes(database):
        if route.response_model is None:
            untyped |= _key(route)
        if "dict" in str(route.endpoint.__annotations__.get("return")):
            dicts |= _key(route)
    assert untyped == RAW
    assert dicts == set()


def test_every_success_in_the_openapi_document_has_a_schema(database: Database) -> None:
    app = create_app(bootstrap(Settings(), database=database, doorbell=RecordingDoorbell()))
    missing = []
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if not status.startswith("2"):
                    continue
                content = answer.get("content", {})
                if (method.upper(), path) in RAW:
                    assert content, (method, path)  # documented, if not as JSON
                    continue
                schema = content.get("application/json", {}).get("schema", {})
                if not schema or schema == {}:
                    missing.append((method, path, status))
    assert missing == []


def test_only_one_module_reaches_into_the_app_for_its_services() -> None:
    reaching = sorted(
        path.relative_to(API).as_posix()
        for path in API.rglob("*.py")
        if re.search(r"app\.state\b", path.read_text())
    )
    assert reaching == ["deps.py"]
