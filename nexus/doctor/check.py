"""A finding of `nexus doctor`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it stands, what was found, and the fix."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
