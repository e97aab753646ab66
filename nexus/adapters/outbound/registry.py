"""Every outbound sender, configured from the settings (built on first use, never at import)."""

from __future__ import annotations

from pydantic import SecretStr

from nexus.adapters.outbound.discord import DiscordSender
from nexus.adapters.outbound.email import EmailSender
from nexus.adapters.outbound.slack import SlackSender
from nexus.adapters.outbound.telegram import TelegramSender
from nexus.adapters.outbound.twilio import TwilioSender
from nexus.adapters.outbound.webhook import WebhookSender
from nexus.adapters.outbound.whatsapp import WhatsAppSender
from nexus.outbound.ports import Sender
from nexus.settings import Settings


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def build_senders(settings: Settings) -> dict[str, Sender]:
    """One sender per adapter; one without its credentials refuses with a clear error."""
    senders: list[Sender] = [
        TelegramSender(_secret(settings.telegram_bot_token), settings.telegram_api_base),
        SlackSender(_secret(settings.slack_bot_token), settings.slack_api_base),
        DiscordSender(_secret(settings.discord_bot_token), settings.discord_api_base),
        WhatsAppSender(_secret(settings.whatsapp_access_token), settings.whatsapp_api_base),
        TwilioSender(
            settings.twilio_account_sid,
            _secret(settings.twilio_auth_token),
            settings.twilio_api_base,
            settings.public_url,
        ),
        EmailSender(
            host=settings.smtp_host,
            port=settings.smtp_port,
            sender=settings.email_from,
            username=settings.smtp_username,
            password=_secret(settings.smtp_password),
            starttls=settings.smtp_starttls,
        ),
        WebhookSender(settings.webhook_reply_url, _secret(settings.webhook_secret)),
    ]
    return {sender.name: sender for sender in senders}
