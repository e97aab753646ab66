"""Health checks behind `nexus doctor`: each names the problem and the fix."""

from __future__ import annotations

from nexus.doctor.channels import check_bluebubbles, check_files, check_gmail, folder_problem
from nexus.doctor.check import Check, Status
from nexus.doctor.services import check_broker, check_database, check_redis
from nexus.doctor.tools import (
    check_credential_hosts,
    check_model,
    check_prices,
    check_sandbox,
    check_secrets,
)
from nexus.settings import Settings


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order `nexus doctor` shows them."""
    return [
        *check_database(settings),
        check_redis(settings),
        check_broker(settings),
        check_model(settings),
        check_prices(settings),
        check_secrets(settings),
        check_sandbox(),
        check_credential_hosts(settings),
        check_gmail(settings),
        check_files(settings),
        check_bluebubbles(settings),
    ]


__all__ = [
    "Check",
    "Status",
    "check_bluebubbles",
    "check_broker",
    "check_credential_hosts",
    "check_database",
    "check_files",
    "check_gmail",
    "check_model",
    "check_prices",
    "check_redis",
    "check_sandbox",
    "check_secrets",
    "folder_problem",
    "run_checks",
]
