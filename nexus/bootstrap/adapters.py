"""Which adapter each setting picks, and how it is built: the composition root's builders.

Each builder imports its adapter when it runs, so a process loads only the adapters it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nexus.db import Database
from nexus.doorbell import CoalescingDoorbell, DeferredDoorbell, Doorbell
from nexus.engine.addresses import OwnAddress, own_addresses, url_addresses
from nexus.ids import Clock
from nexus.outbound.ports import RateLimiter
from nexus.queueing.coordination import Coordination, InProcessCoordination
from nexus.settings import Settings

if TYPE_CHECKING:
    from celery import Celery
    from pydantic import SecretStr

    from nexus.adapters.gmail_api import GmailApi
    from nexus.adapters.platform_files import PlatformFiles


def doorbell_for(
    settings: Settings,
    *,
    consumes_broker: bool,
    celery: Callable[[], Celery],
    coordination: Callable[[], Coordination],
) -> Doorbell:
    """How this process rings: through the broker, once per drain where it can; or not at
    all beside an in-process broker it cannot reach (the relay rings from the ledger)."""
    if settings.broker_url.startswith("memory://") and not consumes_broker:
        return DeferredDoorbell()
    from nexus.adapters.celery_broker import CeleryDoorbell

    bell = CeleryDoorbell(celery())
    # One router ring per drain needs a flag every ringing process sees: Redis, or this
    # one process when the broker itself lives in it.
    if settings.redis_url is not None or settings.broker_url.startswith("memory://"):
        return CoalescingDoorbell(bell, coordination())
    return bell


def coordination_for(settings: Settings) -> Coordination:
    """Redis when configured (every process shares it); otherwise this process's own."""
    if settings.redis_url is None:
        return InProcessCoordination()
    from nexus.adapters.redis_coordination import RedisCoordination

    prefix = settings.broker_prefix or "nexus:"
    return RedisCoordination.from_url(settings.redis_url, prefix=prefix)


def rate_limiter_for(settings: Settings) -> RateLimiter:
    """The senders' rate limit: in Redis when configured, else in this process."""
    if settings.redis_url is None:
        from nexus.outbound.rate_limit import InProcessRateLimiter

        return InProcessRateLimiter()
    from nexus.adapters.redis_rate_limit import RedisRateLimiter

    prefix = settings.broker_prefix or "nexus:"
    return RedisRateLimiter.from_url(settings.redis_url, prefix=prefix)


def own_addresses_for(settings: Settings) -> tuple[OwnAddress, ...]:
    """Where tools never connect: NEXUS_OWN_ADDRESSES, and the API's own URLs."""
    urls = url_addresses((settings.api_url, settings.public_url))
    try:
        return own_addresses([*settings.own_addresses, *urls])
    except ValueError as error:
        raise ValueError(f"NEXUS_OWN_ADDRESSES: {error}") from None


def platform_files_for(settings: Settings, database: Database) -> PlatformFiles:
    """Where the engine fetches inbound files that need a platform's token to open (the
    files channel's own, from the ledger)."""
    from nexus.adapters.ledger_files import LedgerFiles
    from nexus.adapters.platform_files import PlatformFiles

    def secret(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None

    return PlatformFiles(
        max_bytes=settings.attachment_max_bytes,
        timeout_s=settings.attachment_fetch_timeout_seconds,
        telegram_token=secret(settings.telegram_bot_token),
        telegram_api_base=settings.telegram_api_base,
        slack_token=secret(settings.slack_bot_token),
        whatsapp_token=secret(settings.whatsapp_access_token),
        whatsapp_api_base=settings.whatsapp_api_base,
        stored=LedgerFiles(database).fetch,
        bluebubbles_url=settings.bluebubbles_url,
        bluebubbles_password=secret(settings.bluebubbles_password),
    )


def gmail_for(settings: Settings, clock: Clock) -> GmailApi | None:
    """The Gmail mailbox (NEXUS_GMAIL_*), or None when the channel is off."""
    if not settings.gmail_mailbox or not settings.gmail_credential:
        return None
    from nexus.adapters.gmail_api import GmailApi
    from nexus.adapters.outbound.http import new_client
    from nexus.adapters.secrets import EnvironmentSecrets

    return GmailApi(
        mailbox=settings.gmail_mailbox,
        credential=settings.gmail_credential,
        secrets=EnvironmentSecrets(settings.secrets_file),
        api_base=settings.gmail_api_base,
        token_url=settings.gmail_token_url,
        client=new_client(),
        clock=clock,
    )
