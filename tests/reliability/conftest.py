"""The reliability suite's fixtures: the invariant checker runs after every scenario."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from nexus.db import Database
from tests.reliability.watch import InvariantWatch


@pytest.fixture(autouse=True)
def invariants(request: pytest.FixtureRequest) -> Iterator[InvariantWatch]:
    """Every scenario registers its database; the checker runs when the scenario ends."""
    watch = InvariantWatch()
    started = time.monotonic()
    yield watch
    if not watch.watched:
        pytest.fail(f"{request.node.nodeid} never called invariants.watch(database)")
    for entry in watch.watched:
        if not entry.checked:
            watch.check(entry.database)
    print(f"\n{request.node.name}: {time.monotonic() - started:.1f} s with the checker")


@pytest.fixture
def watched_db(pg_database: Database, invariants: InvariantWatch) -> Database:
    """The scenario's empty Postgres ledger, guarded and checked."""
    invariants.watch(pg_database)
    return pg_database
