"""Logging for every process: structlog JSON lines, secrets redacted, no forged lines.

Standard-library records (Celery, uvicorn, SQLAlchemy) go through the same processors, so
a secret or a CR/LF in a message is handled the same wherever it was logged.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import quote, quote_plus

import structlog
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from nexus.settings import Settings

REDACTED = "[redacted]"
# Fields whose values are secret whatever they hold.
_SECRET_KEYS = re.compile(r"(token|secret|password|authorization|api_key|signature)", re.I)
_MIN_SECRET_LENGTH = 4  # shorter "secrets" would redact ordinary words


def secret_values(settings: Settings) -> list[str]:
    """Every secret the settings hold: SecretStr fields (comma lists split), and the
    passwords inside the database and Redis URLs."""
    found: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            raw = value.get_secret_value()
            found.append(raw)
            found.extend(part.strip() for part in raw.split(","))
            found.extend(part.split(":", 1)[-1] for part in raw.split(","))  # user:password
    for url in (settings.database_url, settings.redis_url, settings.broker_url_override):
        if url and "://" in url:
            try:
                password = make_url(url).password
            except Exception:  # an unparsable URL holds no password we could find
                password = None
            if password:
                found.append(str(password))
    # A secret sent as a query parameter (BlueBubbles' password) shows URL-encoded in an
    # access line or an HTTP client's message.
    found.extend(
        form for value in list(found) for form in (quote(value, safe=""), quote_plus(value))
    )
    unique = {value for value in found if len(value) >= _MIN_SECRET_LENGTH}
    return sorted(unique, key=len, reverse=True)  # longest first: no partial leftovers


class Redactor:
    """A structlog processor: secret values anywhere in a string become [redacted]."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = [re.escape(value) for value in secrets]
        self._pattern = re.compile("|".join(values)) if values else None

    def scrub(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern else text

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            if _SECRET_KEYS.search(key) and isinstance(value, str) and value:
                event[key] = REDACTED  # counts such as input_tokens are ints and stay
            elif isinstance(value, str):
                event[key] = self.scrub(value)
            elif value is not None and not isinstance(value, int | float | bool):
                event[key] = self.scrub(str(value))
        return event


def neutralize_newlines(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """User text cannot start a line of its own: CR and LF become visible escapes."""
    for key, value in list(event.items()):
        if isinstance(value, str) and ("\n" in value or "\r" in value):
            event[key] = value.replace("\r", "\\r").replace("\n", "\\n")
    return event


def processors(settings: Settings) -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        Redactor(secret_values(settings)),
        neutralize_newlines,
    ]


# What a quiet `nexus dev` still shows besides warnings: the turns it answers.
SHOWN_WHEN_QUIET = frozenset({"turn_committed"})
# Warnings that say nothing a newcomer can act on: the embedded `memory://` broker has no
# host by design, and kombu says so on every connection.
HIDDEN_WHEN_QUIET = (("kombu.connection", "No hostname was supplied"),)


def _event(record: logging.LogRecord) -> str:
    # A structlog line reaches the handler with its event dict as `msg`; others are text.
    if isinstance(record.msg, dict):
        return str(record.msg.get("event", ""))
    return record.getMessage()


def shown_when_quiet(record: logging.LogRecord) -> bool:
    """Warnings and worse (but the known-harmless ones), and the turns answered."""
    event = _event(record)
    if any(record.name == name and event.startswith(text) for name, text in HIDDEN_WHEN_QUIET):
        return False
    return record.levelno >= logging.WARNING or event in SHOWN_WHEN_QUIET


def configure_logging(settings: Settings, *, stream: Any = None, quiet: bool = False) -> None:
    """Once per process, before anything logs (the API factory, the worker, the CLI).

    `quiet` (a person at `nexus dev`) lets through only warnings and the turns answered."""
    shared = processors(settings)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if settings.log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    if quiet:
        handler.addFilter(shown_when_quiet)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
