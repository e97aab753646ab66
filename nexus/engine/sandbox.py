"""Sandbox permissions (`permissions.sandbox`): the limits code-running tools get.

A tool that runs code or touches files is marked `sandboxed`; only a persona whose
permissions hold a `sandbox` object may call it, and the tool runs under these limits.
`network` is a grant, off by default: the code may open connections (the host's network).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TIMEOUT_RANGE = (1.0, 120.0)  # seconds of wall-clock time per call
MEMORY_RANGE = (64, 4096)  # MiB of address space per call


@dataclass(frozen=True)
class SandboxConfig:
    timeout_seconds: float = 10.0
    memory_mb: int = 256
    network: bool = False  # True: the code shares the worker's network (loopback included)


def sandbox_config(value: Any) -> SandboxConfig:
    """Read `permissions.sandbox`: `{}` for the defaults, or `timeout_seconds`/`memory_mb`,
    and `network: true` to let the code open network connections."""
    if not isinstance(value, Mapping):
        raise ValueError("permissions.sandbox must be an object (say {} for the default limits)")
    unknown = set(value) - {"timeout_seconds", "memory_mb", "network"}
    if unknown:
        raise ValueError(f"permissions.sandbox has unknown keys: {', '.join(sorted(unknown))}")
    config = SandboxConfig()
    timeout = value.get("timeout_seconds", config.timeout_seconds)
    memory = value.get("memory_mb", config.memory_mb)
    low, high = TIMEOUT_RANGE
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (low <= timeout <= high)
    ):
        raise ValueError(f"permissions.sandbox.timeout_seconds must be from {low:g} to {high:g}")
    least, most = MEMORY_RANGE
    if isinstance(memory, bool) or not isinstance(memory, int) or not least <= memory <= most:
        raise ValueError(f"permissions.sandbox.memory_mb must be an integer from {least} to {most}")
    network = value.get("network", config.network)
    if not isinstance(network, bool):
        raise ValueError("permissions.sandbox.network must be true or false")
    return SandboxConfig(timeout_seconds=float(timeout), memory_mb=memory, network=network)
