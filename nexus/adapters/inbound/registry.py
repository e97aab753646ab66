"""Which inbound adapters exist, each built with its secret from the settings."""

from __future__ import annotations

from nexus.adapters.inbound.base import InboundAdapter
from nexus.adapters.inbound.bluebubbles import BlueBubblesAdapter
from nexus.adapters.inbound.bounds import Guarded
from nexus.adapters.inbound.discord import DiscordAdapter
from nexus.adapters.inbound.email import EmailAdapter
from nexus.adapters.inbound.github import GitHubAdapter
from nexus.adapters.inbound.gmail import GmailPushAdapter
from nexus.adapters.inbound.slack import SlackAdapter
from nexus.adapters.inbound.telegram import TelegramAdapter
from nexus.adapters.inbound.twilio import TwilioAdapter
from nexus.adapters.inbound.webhook import StandardWebhookAdapter
from nexus.adapters.inbound.whatsapp import WhatsAppAdapter
from nexus.settings import Settings, revealed


def build_adapters(settings: Settings) -> dict[str, InboundAdapter]:
    """Every adapter is always present; one without its secret rejects every request.
    Each is guarded: a signed body with a field it cannot take is a 400, never a 500."""
    adapters: list[InboundAdapter] = [
        TelegramAdapter(revealed(settings.telegram_secret_token)),
        SlackAdapter(revealed(settings.slack_signing_secret)),
        DiscordAdapter(settings.discord_public_key),
        WhatsAppAdapter(
            revealed(settings.whatsapp_app_secret), revealed(settings.whatsapp_verify_token)
        ),
        TwilioAdapter(revealed(settings.twilio_auth_token), settings.public_url),
        EmailAdapter(revealed(settings.webhook_secret)),
        GitHubAdapter(revealed(settings.github_webhook_secret)),
        StandardWebhookAdapter(revealed(settings.webhook_secret)),
        GmailPushAdapter(revealed(settings.gmail_push_token), settings.gmail_mailbox),
        BlueBubblesAdapter(
            revealed(settings.bluebubbles_webhook_secret), revealed(settings.bluebubbles_password)
        ),
    ]
    return {adapter.name: Guarded(adapter) for adapter in adapters}
