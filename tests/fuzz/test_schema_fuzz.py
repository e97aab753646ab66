"""Every route under Schemathesis: requests generated from the published OpenAPI document
(ones that fit it, and ones that break it), sent to the app in-process on a real Postgres
ledger.

No answer is a 500, and every answer, errors included, has the shape the document declares
for its status. Bounded (a few examples an operation, a fixed seed) so it runs in CI; the
long form, against a real `nexus api` and worker, is in tests/fuzz/README.md.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as fixed_seed
from hypothesis.errors import Unsatisfiable
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEED = 20261128
EXAMPLES = 12  # an operation and a mode; the long form runs hundreds
# The event stream stays open until the client leaves: a request for it never ends.
NEVER_ENDS = {("GET", "/v1/sessions/{label}/stream")}
CHECKS = [not_a_server_error, response_schema_conformance]


@pytest.mark.slow
def test_every_route_answers_as_its_schema_says(pg_database: Database) -> None:
    graph = bootstrap(
        Settings(api_tokens=TOKEN), database=pg_database, doorbell=RecordingDoorbell()
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(graph))
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the document itself is valid OpenAPI
        operations.append(result.ok())
    failures: list[str] = []
    sent = 0
    started = time.monotonic()
    for operation in operations:
        if (operation.method.upper(), operation.path) in NEVER_ENDS:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @fixed_seed(SEED)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Case[Any]) -> None:
                nonlocal sent
                sent += 1
                case.call_and_validate(headers=AUTH, checks=CHECKS)

            try:
                call()
            except Unsatisfiable:
                continue  # nothing to break: no parameter, no body
            except Exception as failure:  # every operation's, not only the first
                failures.append(f"{operation.label} ({mode.value}): {failure}")
    took = time.monotonic() - started
    print(f"{len(operations) - len(NEVER_ENDS)} operations, {sent} requests, {took:.0f} s")
    assert len(operations) > 40  # the whole document, not an empty one
    assert failures == [], "\n\n".join(failures)
