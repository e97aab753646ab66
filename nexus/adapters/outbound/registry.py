"""Every outbound sender, configured from the settings (built on first use, never at import)."""

from __future__ import annotations

from collections.abc import Sequence

from nexus.adapters.gmail_api import GmailApi
from nexus.adapters.outbound.bluebubbles import BlueBubblesClient, BlueBubblesSender
from nexus.adapters.outbound.discord import DiscordSender
from nexus.adapters.outbound.email import EmailSender
from nexus.adapters.outbound.gmail import GmailSender
from nexus.adapters.outbound.slack import SlackSender
from nexus.adapters.outbound.telegram import TelegramSender
from nexus.adapters.outbound.twilio import TwilioSender
from nexus.adapters.outbound.webhook import WebhookSender
from nexus.adapters.outbound.whatsapp import WhatsAppSender
from nexus.adapters.pinned_fetch import PinnedDownloads
from nexus.engine.addresses import OwnAddress
from nexus.outbound.ports import Sender
from nexus.settings import Settings, revealed


def build_senders(
    settings: Settings, *, gmail: GmailApi | None = None, own: Sequence[OwnAddress] = ()
) -> dict[str, Sender]:
    """One sender per adapter; one without its credentials refuses with a clear error.
    `own`: the deployment's addresses, which a reply's attachment is never fetched from."""
    senders: list[Sender] = [
        TelegramSender(revealed(settings.telegram_bot_token), settings.telegram_api_base),
        SlackSender(revealed(settings.slack_bot_token), settings.slack_api_base),
        DiscordSender(revealed(settings.discord_bot_token), settings.discord_api_base),
        WhatsAppSender(revealed(settings.whatsapp_access_token), settings.whatsapp_api_base),
        TwilioSender(
            settings.twilio_account_sid,
            revealed(settings.twilio_auth_token),
            settings.twilio_api_base,
            settings.public_url,
        ),
        EmailSender(
            host=settings.smtp_host,
            port=settings.smtp_port,
            sender=settings.email_from,
            username=settings.smtp_username,
            password=revealed(settings.smtp_password),
            starttls=settings.smtp_starttls,
        ),
        WebhookSender(settings.webhook_reply_url, revealed(settings.webhook_secret)),
        GmailSender(gmail),
        BlueBubblesSender(
            BlueBubblesClient(
                settings.bluebubbles_url,
                revealed(settings.bluebubbles_password),
                method=settings.bluebubbles_send_method,
            ),
            # A reply's files come from URLs the model chose: public addresses only.
            PinnedDownloads(
                max_bytes=settings.attachment_max_bytes,
                timeout_s=settings.attachment_fetch_timeout_seconds,
                own=own,
            ),
        ),
    ]
    return {sender.name: sender for sender in senders}
