"""A rig for outbound tests: an engine whose turns plan deliveries, real senders talking
to the fake platforms, and a pump that plays the delivery worker. `fake` and `rig` are
fixtures: a test module imports them by name (and lists them in `__all__`)."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from nexus.adapters.outbound.registry import build_senders
from nexus.adapters.scripted import Say
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.query import QueryMessage
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.records import DeliveryRecord, SessionRecord
from nexus.outbound.inline import InlineReplies
from nexus.outbound.planning import reply_hook
from nexus.outbound.rate_limit import InProcessRateLimiter
from nexus.outbound.service import DeliveryService, Outcome
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock

WEBHOOK_SECRET = "whsec_" + "c2VjcmV0LWZvci10ZXN0cy1vbmx5LTMyYnl0ZXMhIQ=="
CODE = "\n".join(f"    result_{n:03d} = compute(step={n:03d})  # go on" for n in range(110))
# ~9,000 characters: prose, a code block longer than one message, more prose.
LONG_REPLY = (
    "\n\n".join(f"Paragraph {n}. " + "The ledger keeps every turn. " * 9 for n in range(4))
    + f"\n\n```python\ndef plan():\n{CODE}\n```\n\n"
    + "\n\n".join(f"Closing {n}. " + "Nothing is lost or doubled. " * 10 for n in range(10))
)


def platform_settings(fake: FakePlatforms, **extra: object) -> Settings:
    """Every sender configured, every API base on the fake."""
    base = fake.base_url
    values: dict[str, object] = {
        "telegram_bot_token": "123:TEST",
        "telegram_api_base": base,
        "slack_bot_token": "xoxb-test",
        "slack_api_base": base,
        "discord_bot_token": "discord-test",
        "discord_api_base": base,
        "whatsapp_access_token": "wa-test",
        "whatsapp_api_base": base,
        "twilio_account_sid": "AC00000000000000000000000000000000",
        "twilio_auth_token": "twilio-test",
        "twilio_api_base": base,
        "webhook_reply_url": f"{base}/hooks/reply",
        "webhook_secret": WEBHOOK_SECRET,
        **extra,
    }
    return Settings.model_validate(values)


def message(
    event_id: str,
    adapter: str,
    sender: str,
    text: str = "hello",
    *,
    container: Container | None = None,
    thread: str | None = None,
    message_id: str | None = None,
    space: str | None = None,
    raw: dict[str, object] | None = None,
) -> NexusEvent:
    return NexusEvent(
        id=event_id,
        adapter=adapter,
        platform=adapter,
        space=space,
        sender=Author(id=sender, display_name=sender),
        container=container or Container(kind="dm", id=sender),
        platform_thread_id=thread,
        message_id=message_id,
        text=text,
        occurred_at=0,
        raw=dict(raw or {}),
    )


@dataclass
class OutboundRig:
    rig: Rig
    database: Database
    clock: FakeClock
    doorbell: RecordingDoorbell
    service: DeliveryService
    # What a session run holds around its turn (`holding`) and sends after it; a turn
    # answered outside `holding` leaves its reply to the rung task alone (`pump`).
    inline: InlineReplies
    sleeps: list[float] = field(default_factory=list)

    def arrive(self, event: NexusEvent) -> None:
        with self.database.unit_of_work() as uow:
            ingest(uow, [event], self.doorbell)
            uow.commit()

    def answer(self, session: SessionRecord, event: NexusEvent, reply: str) -> str:
        """A turn answering `event` with `reply`; returns the turn id."""
        self.rig.model.push(Say(reply))
        outcome = self.rig.say(session.id, event.text or "", event_id=event.id)
        assert outcome.status == "committed", outcome
        return outcome.turn_id

    def answer_as_run(
        self, session: SessionRecord, event: NexusEvent, reply: str
    ) -> Callable[[], str]:
        """As `answer`, handing the engine the stored event as a session run does (it read
        it with the queue item), so the reply is addressed without reading it back. The
        event is read and the session claimed now; the returned call runs the turn and
        gives its id."""
        with self.database.unit_of_work() as uow:
            stored = uow.ledger.events.get(event.id)
            epoch = uow.ledger.sessions.claim(session.id)
            uow.commit()
        assert stored is not None
        query = QueryMessage(text=event.text or "", event_id=event.id)

        def run() -> str:
            self.rig.model.push(Say(reply))
            outcome = self.rig.turns.run_turn(session.id, [query], epoch=epoch, source=stored)
            assert outcome.status == "committed", outcome
            return outcome.turn_id

        return run

    def pump(self, *, limit: int = 50) -> list[Outcome]:
        """Play the delivery worker: send whatever was rung, waiting out each delay on the
        ledger's clock, until nothing more is rung."""
        outcomes: list[Outcome] = []
        while self.doorbell.deliveries and len(outcomes) < limit:
            delivery_id, delay_ms = self.doorbell.deliveries.pop(0)
            self.clock.advance(delay_ms)
            outcomes.append(self.service.send(delivery_id))
        return outcomes

    def deliveries(self, turn_id: str) -> list[DeliveryRecord]:
        with self.database.unit_of_work() as uow:
            return uow.ledger.deliveries.for_turn(turn_id)


def outbound_rig(
    database: Database, clock: FakeClock, fake: FakePlatforms, **settings: object
) -> OutboundRig:
    doorbell = RecordingDoorbell()
    rig = build_rig(database, clock)
    configured = platform_settings(fake, **settings)
    sleeps: list[float] = []
    service = DeliveryService(
        database=database,
        senders=build_senders(configured),
        limiter=InProcessRateLimiter(burst=1_000),  # rates have their own tests
        doorbell=doorbell,
        lease_ms=configured.delivery_lease_ms,
        uncertain=configured.delivery_uncertain,
        sleep=sleeps.append,
    )
    inline = InlineReplies(service)
    rig.turns = dataclasses.replace(rig.turns, commit_hooks=(reply_hook(doorbell, inline),))
    return OutboundRig(rig, database, clock, doorbell, service, inline, sleeps)


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


@pytest.fixture
def rig(database: Database, clock: FakeClock, fake: FakePlatforms) -> OutboundRig:
    return outbound_rig(database, clock, fake)


def arrive_telegram(rig: OutboundRig, text: str = "hi") -> NexusEvent:
    """A Telegram DM (message 77 from 4242) stored as arrived."""
    event = message("telegram:1", "telegram", "4242", text, message_id="77")
    rig.arrive(event)
    return event


def shown(telegram_html: str) -> str:
    """A Telegram HTML message's text as shown, which is what its length limit counts."""
    return html.unescape(re.sub(r"<[^>]+>", "", telegram_html))
