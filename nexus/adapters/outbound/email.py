"""Email replies over SMTP, threaded with In-Reply-To and References."""

from __future__ import annotations

import re
import smtplib
from email.message import EmailMessage

from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, SendResult, Sent


class EmailSender:
    name = "email"

    def __init__(
        self,
        *,
        host: str | None,
        port: int,
        sender: str | None,
        username: str | None = None,
        password: str | None = None,
        starttls: bool = True,
        timeout_s: float = 20.0,
    ):
        self._host, self._port, self._from = host, port, sender
        self._username, self._password = username, password
        self._starttls, self._timeout = starttls, timeout_s

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        return False  # a second DATA is a second email, whatever its Message-ID

    def send(self, delivery: DeliveryRecord) -> SendResult:
        if not self._host or not self._from:
            return Refused("NEXUS_SMTP_HOST and NEXUS_EMAIL_FROM must be set")
        message = reply_message(delivery, self._from)
        try:
            with smtplib.SMTP(self._host, self._port, timeout=self._timeout) as smtp:
                if self._starttls:
                    smtp.starttls()
                if self._username and self._password:
                    smtp.login(self._username, self._password)
                smtp.send_message(message)
        except smtplib.SMTPResponseException as error:
            # 4xx is "try later" in SMTP; 5xx is a refusal.
            detail = f"SMTP {error.smtp_code}: {error.smtp_error!r}"
            return RetryLater(detail) if 400 <= error.smtp_code < 500 else Refused(detail)
        except smtplib.SMTPRecipientsRefused as error:
            detail = f"SMTP refused the recipient: {error.recipients}"
            codes = [code for code, _ in error.recipients.values()]
            temporary = bool(codes) and all(400 <= code < 500 for code in codes)
            return RetryLater(detail) if temporary else Refused(detail)
        except (OSError, smtplib.SMTPException) as error:
            return RetryLater(f"{type(error).__name__}: {error}")
        return Sent(message["Message-ID"])


def reply_message(delivery: DeliveryRecord, sender: str) -> EmailMessage:
    """The RFC 822 reply From `sender`, threaded under the message it answers (In-Reply-To,
    and References: the target's own list where it keeps one, else that message)."""
    target = delivery.target
    message = EmailMessage()
    message["From"] = sender
    message["To"] = target["to"]
    message["Subject"] = target.get("subject", "Re: your message")
    # Deterministic, so a receiver that deduplicates on Message-ID can; RFC 5322 allows
    # no ':' in its left part, which our keys (turn:chunk) have.
    local = re.sub(r"[^A-Za-z0-9._-]", ".", delivery.idempotency_key or delivery.id)
    message["Message-ID"] = f"<{local}@{sender.rsplit('@', 1)[-1].strip('>')}>"
    if target.get("in_reply_to"):
        original = f"<{str(target['in_reply_to']).strip('<>')}>"
        message["In-Reply-To"] = original
        message["References"] = target.get("references") or original
    message.set_content(delivery.text)
    return message
