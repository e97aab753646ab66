"""After an entity merge, a platform message from any of the person's senders lands in the
primary session: through the webhook, the router and the aliases (a merge of a merge too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import build_chain

TOKEN = "tok-merge"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SECRET = "telegram-secret"


class Telegram:
    """Telegram webhooks posted to the app, and the router run a worker would do next."""

    def __init__(self, database: Database, tmp_path: Path) -> None:
        settings = Settings(
            api_tokens=TOKEN,
            telegram_secret_token=SECRET,
            inline_session_runs=False,  # routing is the subject, not the turns
            hooks_dir=str(tmp_path / "no-hooks"),
        )
        self.graph: Nexus = bootstrap(settings, database=database, doorbell=RecordingDoorbell())
        self.client = TestClient(create_app(self.graph))
        self.update_id = 0

    def message(self, chat: int, text: str) -> str:
        """Post a DM from `chat`, route it, and return the session label it was queued to."""
        self.update_id += 1
        body: dict[str, Any] = {
            "update_id": self.update_id,
            "message": {
                "message_id": self.update_id,
                "date": 1_767_225_600,
                "chat": {"id": chat, "type": "private"},
                "from": {"id": chat, "first_name": f"user{chat}", "is_bot": False},
                "text": text,
            },
        }
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        response = self.client.post("/v1/inbound/telegram", json=body, headers=headers)
        assert response.status_code == 200, response.text
        [routed] = [
            r for r in self.graph.router.drain() if r.event_id == f"telegram:{self.update_id}"
        ]
        assert routed.disposition == "queued", routed
        assert routed.session_label is not None
        return routed.session_label

    def entity(self, chat: int) -> str:
        with self.graph.database.unit_of_work() as uow:
            entity = uow.ledger.identity.contact_entity("telegram", str(chat))
        assert entity is not None
        return entity

    def give_turns(self, label: str, count: int) -> None:
        with self.graph.database.unit_of_work() as uow:
            session = uow.ledger.sessions.get_by_label(label)
            assert session is not None
            build_chain(uow.ledger, session, count)
            uow.commit()

    def merge(self, into: str, *merged: str) -> dict[str, Any]:
        response = self.client.post(
            "/v1/entities/merge", json={"into": into, "merge": list(merged)}, headers=AUTH
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def test_after_a_merge_every_sender_lands_in_the_primary_session(
    database: Database, tmp_path: Path
) -> None:
    telegram = Telegram(database, tmp_path)
    ada_session = telegram.message(41, "hi, Ada here")
    bob_session = telegram.message(42, "hi, Bob here")
    ada, bob = telegram.entity(41), telegram.entity(42)
    assert (ada_session, bob_session) == (f"dm:{ada}", f"dm:{bob}")
    telegram.give_turns(bob_session, 3)  # Bob's session has more turns: it is the primary

    merged = telegram.merge(ada, bob)  # Bob was Ada all along; Ada's entity is the root
    assert merged["primary_session"] == bob_session
    assert merged["aliases_created"] == [ada_session]

    # The root's own key has a session of its own; the alias must win over it.
    assert telegram.message(41, "Ada again") == bob_session
    assert telegram.message(42, "Bob again") == bob_session


def test_after_a_merge_of_a_merge_every_sender_lands_in_the_newest_primary(
    database: Database, tmp_path: Path
) -> None:
    telegram = Telegram(database, tmp_path)
    for chat in (41, 42, 43):
        telegram.message(chat, f"hello from {chat}")
    ada, bob, cy = (telegram.entity(chat) for chat in (41, 42, 43))
    telegram.give_turns(f"dm:{bob}", 3)
    telegram.give_turns(f"dm:{cy}", 5)
    telegram.merge(ada, bob)  # primary dm:bob; dm:ada → dm:bob

    with database.unit_of_work() as uow:
        uow.ledger.identity.create_entity("ent_person", kind="person", name="Ada Bob Cy")
        uow.commit()
    second = telegram.merge("ent_person", ada)  # the root moves; dm:bob stays the primary
    assert second["primary_session"] == f"dm:{bob}"
    for chat in (41, 42):
        assert telegram.message(chat, "after the second merge") == f"dm:{bob}"

    third = telegram.merge("ent_person", cy)  # Cy's session has the most turns now
    assert third["primary_session"] == f"dm:{cy}"
    for chat in (41, 42, 43):
        assert telegram.message(chat, "after the third merge") == f"dm:{cy}", chat
    with database.unit_of_work() as uow:
        # Every key of the person resolves to the primary, and no alias leads in a circle.
        for key in ("dm:ent_person", f"dm:{ada}", f"dm:{bob}", f"dm:{cy}"):
            found = uow.ledger.sessions.resolve(key)
            assert found is not None and found.label == f"dm:{cy}", key


def test_routing_to_a_merged_away_sessions_head_continues_exactly_that_thread(
    database: Database, tmp_path: Path
) -> None:
    """After a merge, Ada's old session is an alias of Bob's; its head is still a thread of
    its own. `POST /v1/route {thread}` continues that thread, in that session, whatever the
    aliases say of its label: the new turn's parent is that head, not the primary's."""
    telegram = Telegram(database, tmp_path)
    ada_session = telegram.message(41, "hi, Ada here")
    bob_session = telegram.message(42, "hi, Bob here")
    telegram.give_turns(ada_session, 1)
    telegram.give_turns(bob_session, 3)
    telegram.merge(telegram.entity(41), telegram.entity(42))
    with database.reading() as uow:
        ada = uow.ledger.sessions.get_by_label(ada_session)
        assert ada is not None and ada.thread_id is not None
    routed = telegram.client.post(
        "/v1/route", json={"thread": ada.thread_id, "content": "go on from here"}, headers=AUTH
    )
    assert routed.status_code == 202, routed.text
    body = routed.json()
    assert (body["session"], body["how"], body["thread_id"]) == (ada_session, "head", ada.thread_id)
    with database.reading() as uow:
        item = uow.ledger.queue.get(body["queue_item_id"])
    assert item is not None and item.session_id == ada.id
