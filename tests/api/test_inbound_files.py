"""`POST /v1/inbound/files` through the real app: a bearer token, the size limit, stored
once, and a readable file as an attachment the model sees (read back from the ledger)."""

from __future__ import annotations

import base64
import json
from typing import Any

from fastapi.testclient import TestClient

from nexus.adapters.ledger_files import LedgerFiles
from nexus.adapters.platform_files import PlatformFiles
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.api.inbound_support import NOW_S, count_events
from tests.contract.engine_support import build_rig
from tests.support import FakeClock

TOKEN = "upload-token"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: Database, **settings: Any) -> TestClient:
    graph = bootstrap(
        Settings(api_tokens=TOKEN, **settings),
        database=database,
        doorbell=RecordingDoorbell(),
        clock=lambda: NOW_S * 1000,
    )
    return TestClient(create_app(graph), base_url="http://testserver")


def _upload(
    client: TestClient,
    data: bytes = PNG,
    name: str = "chart.png",
    mime: str = "image/png",
    **form: str,
) -> Any:
    files = {"file": (name, data, mime)}
    return client.post("/v1/inbound/files", files=files, data=form, headers=AUTH)


def test_a_missing_or_wrong_token_is_401_and_nothing_is_stored(pg_database: Database) -> None:
    client = _client(pg_database)
    files = {"file": ("chart.png", PNG, "image/png")}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        answer = client.post("/v1/inbound/files", files=files, headers=headers)
        assert answer.status_code == 401, headers
        assert answer.headers["www-authenticate"] == "Bearer"
    assert count_events(pg_database) == 0


def test_a_body_over_the_limit_is_413_and_nothing_is_stored(pg_database: Database) -> None:
    client = _client(pg_database, max_body_bytes=4096)
    answer = _upload(client, data=b"x" * 5000, name="big.bin", mime="application/octet-stream")
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "payload_too_large"
    assert count_events(pg_database) == 0


def test_an_upload_is_stored_once_and_a_retry_is_a_duplicate(pg_database: Database) -> None:
    client = _client(pg_database)
    first = _upload(client, text="this quarter", session="ops", metadata='{"from": "scanner"}')
    again = _upload(client, text="this quarter", session="ops", metadata='{"from": "scanner"}')
    assert first.status_code == 202 and first.json()["duplicate"] is False
    assert again.status_code == 200 and again.json() == {**first.json(), "duplicate": True}
    assert count_events(pg_database) == 1
    # The client's own key makes a changed retry the same upload too.
    keyed = [_upload(client, data=PNG + bytes([n]), id="upload-7") for n in range(2)]
    assert [a.status_code for a in keyed] == [202, 200]
    assert count_events(pg_database) == 2
    with pg_database.unit_of_work() as uow:
        event = uow.ledger.events.get(first.json()["event_id"])
        payload = uow.ledger.events.payload_of(first.json()["event_id"])
    assert event is not None
    assert (event.adapter, event.container_id, event.text) == ("files", "ops", "this quarter")
    assert payload["metadata"] == {"from": "scanner"} and payload["label"] == "ops"


def test_bad_forms_are_refused_and_change_nothing(pg_database: Database) -> None:
    client = _client(pg_database)
    no_file = client.post(
        "/v1/inbound/files", data={"text": "hi"}, files={"other": ("a", b"a")}, headers=AUTH
    )
    assert no_file.status_code == 422
    not_form = client.post(
        "/v1/inbound/files", content=b"{}", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert not_form.status_code == 400
    bad_metadata = _upload(client, metadata="[1, 2]")
    assert bad_metadata.status_code == 422
    assert count_events(pg_database) == 0


def test_an_unreadable_type_is_a_note_with_its_name_type_and_size(pg_database: Database) -> None:
    client = _client(pg_database)
    answer = _upload(
        client, data=b"PK\x03\x04" * 10, name="../../etc/report.zip", mime="application/zip"
    )
    assert answer.status_code == 202
    with pg_database.unit_of_work() as uow:
        event = uow.ledger.events.get(answer.json()["event_id"])
    assert event is not None and event.attachments == ()
    assert event.text is not None
    assert event.text.startswith('[attachment] file "report.zip", application/zip, 40 bytes')


def _seen_by_model(database: Database, clock: FakeClock, event_id: str) -> list[dict[str, Any]]:
    """Run a turn on the stored event's attachments, as the session runner would, and
    answer what the model was handed."""
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    assert event is not None
    rig = build_rig(database, clock)
    rig.turns.attachments = PlatformFiles(
        max_bytes=100_000, timeout_s=5.0, stored=LedgerFiles(database).fetch
    )
    session = rig.session()
    outcome = rig.say(
        session.id,
        event.text or "",
        platform=event.platform,
        attachments=event.attachments,
        event_id=event.id,
    )
    assert outcome.status == "committed"
    content: list[dict[str, Any]] = list(rig.model.requests[-1].messages[-1]["content"])
    return content


def test_an_uploaded_image_is_an_attachment_the_model_sees(
    pg_database: Database, clock: FakeClock
) -> None:
    answer = _upload(_client(pg_database))
    content = _seen_by_model(pg_database, clock, answer.json()["event_id"])
    images = [block for block in content if block["type"] == "image"]
    assert images == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        }
    ]
    # The ledger keeps the turn's metadata only; the bytes stay in the files table.
    with pg_database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql("SELECT content FROM messages").scalars().all()
    assert base64.b64encode(PNG).decode() not in json.dumps(list(rows), default=str)


def test_an_uploaded_text_is_a_document_the_model_reads(
    pg_database: Database, clock: FakeClock
) -> None:
    notes = "Minutes\n- ship the files channel\n"
    answer = _upload(_client(pg_database), data=notes.encode(), name="minutes.md", mime="")
    content = _seen_by_model(pg_database, clock, answer.json()["event_id"])
    documents = [block for block in content if block["type"] == "document"]
    assert documents == [
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": notes},
            "title": "minutes.md",
        }
    ]
