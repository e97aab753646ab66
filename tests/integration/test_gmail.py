"""Gmail natively, against a loopback fake of the Gmail API and Google's token endpoint,
through the client a deployment uses (httpx): each message stored once whatever pushes and
syncs overlap, a history too old, the reply in its thread, the watch renewed when due, and
no token in any log line."""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
from collections.abc import Iterator
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from nexus.adapters.gmail_api import GmailApi
from nexus.adapters.outbound.gmail import GmailSender
from nexus.adapters.secrets import EnvironmentSecrets
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ingest.gmail import GmailError, Synced, sync_mailbox
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.models import Event, table_of
from nexus.ledger.records import DeliveryRecord
from nexus.logs import configure_logging
from nexus.outbound.addressing import address_for
from nexus.outbound.ports import Refused, RetryLater, Sent
from nexus.settings import Settings
from nexus.timer.gmail_watch import DAY_MS, renew_watch
from tests.fakes.gmail_server import CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN, WEEK_MS, FakeGmail
from tests.support import FakeClock
from workers.gmail import gmail_on_tick

MAILBOX = "bot@example.com"
PUSH_TOKEN = "push-token-3f9a1c"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gmail"
OAUTH = json.dumps(
    {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN}
)


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeGmail]:
    with FakeGmail(address=MAILBOX, now_ms=clock.now) as server:
        yield server


def _environ(fake: FakeGmail, *, hosts: bool = True) -> dict[str, str]:
    environ = {"NEXUS_CREDENTIAL_GMAIL": OAUTH}
    if hosts:
        environ["NEXUS_CREDENTIAL_GMAIL_HOSTS"] = f"{fake.base_url}/"
    return environ


def _api(fake: FakeGmail, clock: FakeClock, *, hosts: bool = True) -> GmailApi:
    return GmailApi(
        mailbox=MAILBOX,
        credential="gmail",
        secrets=EnvironmentSecrets(None, environ=_environ(fake, hosts=hosts)),
        api_base=fake.base_url,
        token_url=fake.token_url,
        client=httpx.Client(timeout=10),
        clock=clock,
    )


def _mail(text: str, *, sender: str = "ada@example.org", subject: str = "Dinner") -> bytes:
    return (
        f"From: Ada Lovelace <{sender}>\r\nTo: {MAILBOX}\r\nSubject: {subject}\r\n"
        f"Message-ID: {make_msgid(domain='mail.example.org')}\r\n"
        f"Date: Thu, 1 Jan 2026 09:00:00 +0000\r\n\r\n{text}\r\n"
    ).encode()


def _sync(database: Database, api: GmailApi, doorbell: RecordingDoorbell | None = None) -> Synced:
    return sync_mailbox(database, api, doorbell or RecordingDoorbell(), resync_limit=50)


def _gmail_events(database: Database) -> list[str]:
    events = table_of(Event)
    with database.reading() as uow:
        rows = uow.connection.execute(
            select(events.c.id)
            .where(events.c.adapter == "gmail", events.c.kind == "message")
            .order_by(events.c.id)
        )
        return [row.id for row in rows]


def _watermark(database: Database) -> int | None:
    with database.reading() as uow:
        state = uow.ledger.gmail.get(MAILBOX)
    return state.history_id if state else None


# --- reading the mailbox ----------------------------------------------------------------------


def test_the_first_sync_starts_from_now_then_each_new_message_is_stored_and_rung(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    fake.deliver(_mail("sent before Nexus watched"))
    started = _sync(database, api)
    assert started.started and started.stored == ()
    assert _watermark(database) == fake.history_id
    first, second = fake.deliver(_mail("one")), fake.deliver(_mail("two"))
    doorbell = RecordingDoorbell()
    synced = _sync(database, api, doorbell)
    assert synced.stored == (f"gmail:{first}", f"gmail:{second}")
    assert _gmail_events(database) == sorted(synced.stored)
    assert doorbell.events == list(synced.stored)  # each rings the router once stored
    assert _watermark(database) == fake.history_id
    # History is read from the watermark, for the INBOX's added messages only.
    [call] = [
        c for c in fake.of("history") if c.query["startHistoryId"] == [str(started.history_id)]
    ]
    assert call.query["historyTypes"] == ["messageAdded"] and call.query["labelId"] == ["INBOX"]
    assert {c.query["format"][0] for c in fake.of("get")} == {"raw"}


def test_a_sync_run_again_stores_nothing_twice_and_fetches_nothing_stored(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    fake.deliver(_mail("one"))
    assert len(_sync(database, api).stored) == 1
    gets = len(fake.of("get"))
    # The same history again (as a redelivered push, or a watermark not yet moved, sees it).
    with database.unit_of_work() as uow:
        uow.connection.execute(table_of(Event).update().values(text="kept"))
        uow.commit()
    again = sync_mailbox(database, api, RecordingDoorbell(), resync_limit=50)
    assert again.stored == () and len(fake.of("get")) == gets
    assert len(_gmail_events(database)) == 1


def test_two_syncs_listing_the_same_history_at_once_store_each_message_once(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    delivered = [fake.deliver(_mail(f"message {n}")) for n in range(3)]
    fake.gate_history(2)  # neither sync lists until both have asked: the same start, for both
    results: list[Synced] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(_sync(database, _api(fake, clock)))
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(i for r in results for i in r.stored) == sorted(f"gmail:{d}" for d in delivered)
    assert _gmail_events(database) == sorted(f"gmail:{d}" for d in delivered)
    assert _watermark(database) == fake.history_id


def test_the_watermark_never_moves_back_when_a_slower_sync_finishes_last(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    fake.deliver(_mail("one"))
    _sync(database, api)
    reached = _watermark(database)
    assert reached is not None
    with database.unit_of_work() as uow:
        assert not uow.ledger.gmail.advance(MAILBOX, reached - 7)  # an older listing's end
        uow.commit()
    assert _watermark(database) == reached


def test_messages_gone_before_they_are_read_are_skipped_and_mail_we_sent_is_not_fetched(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    kept, gone = fake.deliver(_mail("kept")), fake.deliver(_mail("deleted"))
    sent = fake.deliver(_mail("our own", sender=MAILBOX), labels=("INBOX", "SENT"))
    fake.delete(gone)
    synced = _sync(database, api)
    assert synced.stored == (f"gmail:{kept}",)
    assert all(not c.path.endswith(sent) for c in fake.of("get"))
    assert _watermark(database) == fake.history_id


def test_a_history_too_old_falls_back_to_the_recent_inbox_bounded(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    seen = fake.deliver(_mail("stored before the outage"))
    _sync(database, api)
    missed = [fake.deliver(_mail(f"during the outage {n}")) for n in range(4)]
    fake.expire_history()  # a week later: Gmail no longer knows our watermark
    synced = sync_mailbox(database, api, RecordingDoorbell(), resync_limit=3)
    assert synced.resynced
    # The three newest (the bound); the one stored before is not stored again.
    assert synced.stored == tuple(f"gmail:{m}" for m in missed[1:])
    assert f"gmail:{seen}" in _gmail_events(database)
    assert _watermark(database) == fake.history_id
    # ... and the next sync reads history again from there.
    fake.deliver(_mail("after"))
    assert not _sync(database, api).resynced


def test_a_gmail_failure_leaves_the_watermark_for_the_retry(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    before = _watermark(database)
    first, second = fake.deliver(_mail("one")), fake.deliver(_mail("two"))
    fake.fail_next("get", 503)
    with pytest.raises(GmailError, match="503"):
        _sync(database, api)
    assert _watermark(database) == before and _gmail_events(database) == []
    synced = _sync(database, api)
    assert synced.stored == (f"gmail:{first}", f"gmail:{second}")


def test_a_message_nexus_cannot_read_is_recorded_and_the_sync_moves_past_it(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    broken, fine = fake.deliver(_mail("broken")), fake.deliver(_mail("fine"))
    fake.serve_next("get", {"id": broken, "threadId": broken, "raw": 17})  # not format=raw
    synced = _sync(database, api)
    assert synced.stored == (f"gmail:{broken}", f"gmail:{fine}")
    with database.reading() as uow:
        unreadable = uow.ledger.events.get(f"gmail:{broken}")
    assert unreadable is not None and unreadable.kind == "unsupported"
    assert _gmail_events(database) == [f"gmail:{fine}"]
    assert _watermark(database) == fake.history_id


def test_the_recorded_history_answer_is_read_as_gmail_sends_it(
    clock: FakeClock, fake: FakeGmail
) -> None:
    recorded = json.loads((FIXTURES / "history_list.json").read_text())
    fake.serve_next("history", recorded)
    page = _api(fake, clock).history(1234567000)
    # The INBOX message; the one the mailbox sent (label SENT) is never fetched.
    assert page.message_ids == ("18c9f2a4b7e3d001",)
    assert (page.history_id, page.next_page) == (1234567890, None)


# --- the push endpoint ------------------------------------------------------------------------


def _app(database: Database, fake: FakeGmail, doorbell: RecordingDoorbell) -> TestClient:
    settings = Settings(
        gmail_mailbox=MAILBOX,
        gmail_credential="gmail",
        gmail_push_token=PUSH_TOKEN,
        gmail_api_base=fake.base_url,
        gmail_token_url=fake.token_url,
    )
    return TestClient(create_app(bootstrap(settings, database=database, doorbell=doorbell)))


def _push(history_id: int, push_id: str = "2070443601311540") -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads((FIXTURES / "pubsub_push.json").read_text())
    data = json.dumps({"emailAddress": MAILBOX, "historyId": history_id}).encode()
    recorded["message"].update(data=base64.b64encode(data).decode(), messageId=push_id)
    return recorded


def _count_events(database: Database) -> int:
    with database.reading() as uow:
        return int(
            uow.connection.execute(select(func.count()).select_from(table_of(Event))).scalar_one()
        )


@pytest.mark.parametrize("query", ["", "?token=wrong", f"?token={PUSH_TOKEN}x"])
def test_a_push_without_the_right_token_is_401_and_stores_nothing(
    database: Database, fake: FakeGmail, query: str
) -> None:
    doorbell = RecordingDoorbell()
    response = _app(database, fake, doorbell).post(f"/v1/inbound/gmail{query}", json=_push(1))
    assert response.status_code == 401
    assert _count_events(database) == 0 and doorbell.mailboxes == []


def test_a_push_redelivered_is_recorded_once_and_every_delivery_rings_the_sync(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    doorbell = RecordingDoorbell()
    client = _app(database, fake, doorbell)
    api = _api(fake, clock)
    _sync(database, api)
    message = fake.deliver(_mail("hello"))
    answers = [
        client.post(f"/v1/inbound/gmail?token={PUSH_TOKEN}", json=_push(fake.history_id))
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.json()["accepted"][0]["duplicate"] for a in answers] == [False, True]
    assert answers[0].json()["accepted"][0]["routable"] is False
    assert doorbell.mailboxes == [MAILBOX, MAILBOX]
    # Each ring runs a sync (as the worker task does): the message is stored once.
    stored = [i for _ in doorbell.mailboxes for i in _sync(database, api).stored]
    assert stored == [f"gmail:{message}"]
    assert _gmail_events(database) == [f"gmail:{message}"]


# --- the reply --------------------------------------------------------------------------------


def _delivery(target: dict[str, Any]) -> DeliveryRecord:
    return DeliveryRecord(
        id="01DELIVERY", turn_id="01TURN", chunk_index=0, session_id="01SESSION",
        event_id="reply:01TURN", platform="gmail", target=target,
        text="Booked for 7pm.", status=DeliveryStatus.SENDING, attempts=1,
        idempotency_key="01TURN:0", provider_message_id=None, error=None,
        next_attempt_at=None, created_at=0, updated_at=0,
    )  # fmt: skip


def test_the_reply_goes_out_once_in_the_thread_with_its_headers(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    recorded = json.loads((FIXTURES / "messages_get_raw.json").read_text())
    incoming = fake.deliver(base64.urlsafe_b64decode(recorded["raw"]), thread_id="thread-7")
    [event_id] = _sync(database, api).stored
    with database.reading() as uow:
        event = uow.ledger.events.get(event_id)
        payload = uow.ledger.events.payload_of(event_id)
    assert event is not None and event.platform_thread_id == "thread-7"
    address = address_for(event, payload)
    assert address is not None and address.sender == "gmail"
    result = GmailSender(api).send(_delivery(address.target))
    [sent] = fake.sent()
    assert result == Sent(sent.id)
    [send] = fake.of("send")
    assert send.body["threadId"] == "thread-7" == sent.thread_id
    headers = fake.sent_headers(sent)
    assert headers["From"] == MAILBOX and headers["To"] == "ada@example.org"
    assert headers["Subject"] == "Re: Dinner on Friday?"
    assert headers["In-Reply-To"] == "<CAJ8x+Lq2N0fake0msg1@mail.gmail.com>"
    assert headers["References"].split() == [  # folded onto a second line: it is long
        "<CAJ8x+Lq2N0fake0root@mail.gmail.com>",
        "<CAJ8x+Lq2N0fake0msg1@mail.gmail.com>",
    ]
    # Our reply lands in the mailbox's history too (label SENT): it is never read as mail.
    assert _sync(database, api).stored == () and incoming in fake.messages


@pytest.mark.parametrize(
    ("status", "outcome"), [(503, RetryLater), (429, RetryLater), (400, Refused), (403, Refused)]
)
def test_a_reply_gmail_refuses_is_retried_or_failed_and_never_sent_twice(
    clock: FakeClock, fake: FakeGmail, status: int, outcome: type
) -> None:
    fake.fail_next("send", status)
    result = GmailSender(_api(fake, clock)).send(_delivery({"to": "ada@example.org"}))
    assert isinstance(result, outcome) and fake.sent() == []


def test_a_reply_without_gmail_configured_is_refused_saying_what_to_set() -> None:
    result = GmailSender(None).send(_delivery({"to": "ada@example.org"}))
    assert isinstance(result, Refused) and "NEXUS_GMAIL_MAILBOX" in result.error


# --- the watch --------------------------------------------------------------------------------


def test_the_watch_is_renewed_when_due_and_not_before(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    topic = "projects/acme/topics/gmail"
    first = renew_watch(database, api, topic=topic, now_ms=clock.now)
    assert first is not None and fake.watches == [
        {"topicName": topic, "labelIds": ["INBOX"], "labelFilterBehavior": "INCLUDE"}
    ]
    with database.reading() as uow:
        state = uow.ledger.gmail.get(MAILBOX)
    assert state is not None and state.watch_expires_at == fake.now_ms + WEEK_MS
    assert state.history_id == first.history_id  # a mailbox never synced starts here
    clock.advance(5 * DAY_MS)  # two days left: not yet
    assert renew_watch(database, api, topic=topic, now_ms=clock.now) is None
    assert len(fake.watches) == 1
    clock.advance(DAY_MS + 1000)  # less than a day left
    assert renew_watch(database, api, topic=topic, now_ms=clock.now) is not None
    assert len(fake.watches) == 2


def test_the_tick_renews_the_watch_and_reads_new_mail_with_the_deployment_graph(
    database: Database, clock: FakeClock, fake: FakeGmail, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _environ(fake).items():
        monkeypatch.setenv(name, value)
    settings = Settings(
        gmail_mailbox=MAILBOX,
        gmail_credential="gmail",
        gmail_topic="projects/acme/topics/gmail",
        gmail_api_base=fake.base_url,
        gmail_token_url=fake.token_url,
    )
    graph = bootstrap(settings, database=database, doorbell=RecordingDoorbell(), clock=clock)
    gmail_on_tick(graph)  # watch made; the mailbox starts at its history id
    message = fake.deliver(_mail("hello"))
    gmail_on_tick(graph)
    assert len(fake.watches) == 1
    assert _gmail_events(database) == [f"gmail:{message}"]
    assert "gmail" in graph.senders


# --- tokens -----------------------------------------------------------------------------------


def test_an_access_token_is_reused_and_refreshed_once_when_gmail_refuses_it(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    api = _api(fake, clock)
    _sync(database, api)
    _sync(database, api)
    assert len(fake.of("token")) == 1
    fake.revoke_tokens()
    _sync(database, api)
    assert len(fake.of("token")) == 2
    clock.advance(fake.token_lifetime_s * 1000)  # expired by now: a new one first
    _sync(database, api)
    assert len(fake.of("token")) == 3
    assert fake.of("history")[-1].headers["authorization"] == f"Bearer {fake.issued[-1]}"


def test_a_credential_that_declares_no_hosts_is_sent_nowhere(
    database: Database, clock: FakeClock, fake: FakeGmail
) -> None:
    with pytest.raises(GmailError, match="declares no hosts"):
        _sync(database, _api(fake, clock, hosts=False))
    assert fake.calls == []


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging(Settings(log_level="DEBUG"), stream=stream)
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()


def test_no_token_or_client_secret_reaches_a_log_line_or_an_error(
    database: Database, clock: FakeClock, fake: FakeGmail, log_stream: io.StringIO
) -> None:
    api = _api(fake, clock)
    graph_log = structlog.get_logger("test")
    _sync(database, api)
    fake.deliver(_mail("hello"))
    fake.revoke_tokens()  # a 401, then a refresh
    _sync(database, api)
    fake.fail_next("send", 400, {"error": {"code": 400, "message": "Invalid To header"}})
    refused = GmailSender(api).send(_delivery({"to": "ada@example.org"}))
    fake.revoke_tokens()
    fake.fail_next("token", 400, {"error": "invalid_grant", "error_description": "Bad Request"})
    with pytest.raises(GmailError) as invalid:
        _sync(database, api)
    graph_log.warning("gmail_sync_failed", error=str(invalid.value))
    logged = log_stream.getvalue()
    assert "invalid_grant" in str(invalid.value)
    assert isinstance(refused, Refused)
    assert logged  # DEBUG lines from httpx and the client were captured
    for secret in (*fake.issued, REFRESH_TOKEN, CLIENT_SECRET):
        assert secret not in logged
        assert secret not in str(invalid.value) and secret not in refused.error
