"""How hard the scenarios push: NEXUS_RELIABILITY_HEAVY=1 selects the heavy variants."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")
HEAVY = os.environ.get("NEXUS_RELIABILITY_HEAVY", "") not in ("", "0")


def pick(default: T, heavy: T) -> T:
    """`heavy` under NEXUS_RELIABILITY_HEAVY=1, else `default` (the CI variant)."""
    return heavy if HEAVY else default
