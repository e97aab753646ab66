"""Every authenticated route the app declares refuses a missing or wrong bearer token,
so a route added later without the dependency fails here."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import FakeClock


def test_every_v1_route_but_the_webhooks_refuses_bad_tokens(
    database: Database, clock: FakeClock
) -> None:
    app = create_app(
        bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    )
    client = TestClient(app)
    checked = []
    # The OpenAPI document is the app's own list of what it serves.
    for template, operations in app.openapi()["paths"].items():
        if not template.startswith("/v1/") or template.startswith("/v1/inbound/"):
            continue  # platform webhooks carry the platform's signature instead
        path = re.sub(r"\{[^}]+\}", "x", template)
        for method in operations:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                answer = client.request(method.upper(), path, headers=headers)
                assert answer.status_code == 401, (method, template, answer.text)
                assert answer.json()["error"]["type"] == "unauthorized"
            checked.append(f"{method.upper()} {template}")
    published = {
        "POST /v1/events", "GET /v1/events/{event_id}", "POST /v1/entities/merge",
        "GET /v1/sessions", "POST /v1/sessions", "GET /v1/sessions/{label}",
        "POST /v1/sessions/{label}/messages", "GET /v1/sessions/{label}/turns",
        "GET /v1/sessions/{label}/queue", "DELETE /v1/sessions/{label}/queue/{item_id}",
        "POST /v1/sessions/{label}/compact", "POST /v1/sessions/{label}/abort",
        "GET /v1/sessions/{label}/stream", "GET /v1/turns/{turn_id}",
        "GET /v1/turns/{turn_id}/thread", "POST /v1/turns/{turn_id}/fork", "POST /v1/route",
        "GET /v1/agents", "POST /v1/agents", "GET /v1/agents/{agent_id}",
        "PATCH /v1/agents/{agent_id}", "DELETE /v1/agents/{agent_id}", "GET /v1/capabilities",
        "PUT /v1/agents/{agent_id}/capabilities", "GET /v1/hooks",
        "POST /v1/hooks/{name}/enable", "POST /v1/hooks/{name}/disable",
        "GET /v1/hooks/{name}/invocations",
    }  # fmt: skip
    assert published <= set(checked), sorted(published - set(checked))
