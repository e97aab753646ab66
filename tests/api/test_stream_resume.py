"""GET /v1/sessions/{label}/stream with a Last-Event-ID no stream issued: a 400 that says
what is wrong, before any stream starts (a silent replay from elsewhere would be a gap or
duplicates). The ids themselves: `parse_stream_id`."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.queueing.stream_log import FUTURE_SKEW_MS, BadStreamId, parse_stream_id
from nexus.settings import Settings
from tests.support import new_session

AUTH = {"Authorization": "Bearer tok"}
NOW_MS = 1_700_000_000_000
MALFORMED = [
    "",
    "abc",
    "1-2-3",
    "-1",
    "1700000000000-",
    " 1700000000000-0",
    "1700000000000-0 ",
    "\uff11\uff17\uff10\uff10-0",  # fullwidth digits: digits to `\d`, not to Redis
    "1e3-0",
    "18446744073709551616-0",  # one past an unsigned 64-bit number
    "1-18446744073709551616",
    "x" * 10_000,
]


@pytest.mark.parametrize("value", MALFORMED)
def test_an_id_no_stream_issued_is_refused_with_a_reason(value: str) -> None:
    with pytest.raises(BadStreamId) as refused:
        parse_stream_id(value, now_ms=NOW_MS)
    assert "stream event id" in str(refused.value)
    assert len(str(refused.value)) < 200  # a long header is not echoed back whole


def test_ids_are_read_as_redis_reads_them() -> None:
    assert parse_stream_id("0-0", now_ms=NOW_MS) == "0-0"
    assert parse_stream_id("0", now_ms=NOW_MS) == "0-0"
    assert parse_stream_id("1699999999999-7", now_ms=NOW_MS) == "1699999999999-7"
    assert parse_stream_id("1700000000000", now_ms=NOW_MS) == "1700000000000-0"
    assert parse_stream_id("001-02", now_ms=NOW_MS) == "1-2"
    # A writer's clock a little ahead of ours is skew; far ahead, no event has that id yet.
    ahead = NOW_MS + FUTURE_SKEW_MS
    assert parse_stream_id(f"{ahead}-0", now_ms=NOW_MS) == f"{ahead}-0"
    with pytest.raises(BadStreamId, match="ahead of this server's clock"):
        parse_stream_id(f"{ahead + 1}-0", now_ms=NOW_MS)


@pytest.fixture
def client(tmp_path: Path, sqlite_template: Path) -> Iterator[TestClient]:
    # SQLite alone: nothing here depends on the database.
    shutil.copyfile(sqlite_template, tmp_path / "nexus.db")
    database = Database(f"sqlite:///{tmp_path / 'nexus.db'}")
    with database.unit_of_work() as uow:
        new_session(uow.ledger, "dm:resume")
        uow.commit()
    graph = bootstrap(
        Settings(api_tokens="tok"),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=InProcessCoordination(),
    )
    yield TestClient(create_app(graph))
    database.close()


@pytest.mark.parametrize("value", ["abc", "1-2-3", "18446744073709551616-0", "\uff19-0"])
@pytest.mark.parametrize("given_as", ["header", "query"])
def test_a_malformed_last_event_id_is_400_with_a_clear_message(
    client: TestClient, value: str, given_as: str
) -> None:
    if given_as == "header":
        # As bytes: a hostile client sends whatever bytes it likes.
        headers = {b"Authorization": b"Bearer tok", b"Last-Event-ID": value.encode()}
        answer = client.get("/v1/sessions/dm:resume/stream", headers=headers)
    else:
        answer = client.get(
            "/v1/sessions/dm:resume/stream", params={"last_event_id": value}, headers=AUTH
        )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_last_event_id"
    where = "Last-Event-ID header" if given_as == "header" else "last_event_id"
    assert where in error["message"] and "stream event id" in error["message"]


def test_an_id_from_the_future_is_400(client: TestClient) -> None:
    ahead = int(time.time() * 1000) + 2 * FUTURE_SKEW_MS
    answer = client.get(
        "/v1/sessions/dm:resume/stream", headers={**AUTH, "Last-Event-ID": f"{ahead}-0"}
    )
    assert answer.status_code == 400
    assert "ahead of this server's clock" in answer.json()["error"]["message"]


def test_a_good_header_does_not_excuse_a_malformed_query(client: TestClient) -> None:
    answer = client.get(
        "/v1/sessions/dm:resume/stream",
        params={"last_event_id": "nonsense"},
        headers={**AUTH, "Last-Event-ID": "0-0"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("last_event_id:")
