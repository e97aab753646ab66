"""What a quiet `nexus dev` lets through (pure: a record in, shown or not)."""

from __future__ import annotations

import logging

from nexus.logs import shown_when_quiet


def _record(name: str, level: int, msg: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_warnings_and_answered_turns_are_shown() -> None:
    assert shown_when_quiet(_record("nexus.x", logging.WARNING, {"event": "slow"}))
    assert shown_when_quiet(
        _record("nexus.sessions.runner", logging.INFO, {"event": "turn_committed"})
    )


def test_info_detail_and_the_brokers_hostname_warning_are_hidden() -> None:
    assert not shown_when_quiet(_record("alembic.runtime.migration", logging.INFO, "Running"))
    assert not shown_when_quiet(_record("celery.app.trace", logging.INFO, "Task x succeeded"))
    hostname = "No hostname was supplied. Reverting to default 'localhost'"
    assert not shown_when_quiet(_record("kombu.connection", logging.WARNING, hostname))
    assert shown_when_quiet(_record("kombu.connection", logging.WARNING, "lost the broker"))
