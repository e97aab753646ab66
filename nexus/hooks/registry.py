"""The shared hook registry (the `hooks` table): written only when someone asks for it.

Every worker loads the hooks directory of its own machine and runs the hooks that are both
loaded there and enabled here. Which hooks exist is decided by an explicit registration
(`nexus hooks sync` at deploy, which asks the API to register the API process's own
`NEXUS_HOOKS_DIR`, or `nexus dev` for its own directory), never by whichever worker happened
to start last: a machine with no hooks directory must not switch off every hook of the
deployment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nexus.hooks.service import HookRunner


class RegistrationRefused(Exception):
    """The directory cannot stand for the deployment's hooks; nothing was changed."""


@dataclass(frozen=True)
class Registered:
    hooks: tuple[str, ...]  # registered or updated from the directory (enabled if new)
    disabled: tuple[str, ...]  # in the registry, no longer in the directory
    problems: tuple[str, ...] = ()  # files that did not load (a registration refuses them)


class RunnerFactory(Protocol):
    """Loads the hooks directory afresh, each file problem reported (the object graph's
    `fresh_hook_runner`)."""

    def __call__(self, *, on_problem: Callable[[str], object]) -> HookRunner: ...


def sync_directory(
    fresh_runner: RunnerFactory, directory: str | Path, *, allow_empty: bool
) -> Registered:
    """Load `directory` as it is now and register it (`register_directory`): what
    `POST /v1/hooks/sync` does in the API process with its own NEXUS_HOOKS_DIR."""
    problems: list[str] = []
    runner = fresh_runner(on_problem=problems.append)
    registered = register_directory(runner, directory, problems, allow_empty=allow_empty)
    return Registered(registered.hooks, registered.disabled, tuple(problems))


def register_directory(
    runner: HookRunner, directory: str | Path, problems: Sequence[str], *, allow_empty: bool
) -> Registered:
    """Make the registry follow `directory`, whose hooks `runner` loaded (with `problems`).

    Refused, changing nothing, when the directory is missing, when a file in it does not
    load (its hook would be switched off as if deleted), or when it holds no hooks at all
    unless `allow_empty` says that switching every hook off is what is meant."""
    if not Path(directory).is_dir():
        raise RegistrationRefused(
            f"there is no directory {str(directory)!r} (NEXUS_HOOKS_DIR): nothing registered"
        )
    if problems:
        raise RegistrationRefused(
            "some hook files do not load; fix or remove them first: " + "; ".join(problems)
        )
    if not runner.hooks and not allow_empty:
        raise RegistrationRefused(
            f"there are no hooks in {str(directory)!r}: registering it would switch off every "
            "hook of the deployment (allow an empty directory to mean exactly that)"
        )
    disabled = runner.sync()
    return Registered(hooks=tuple(h.meta.name for h in runner.hooks), disabled=tuple(disabled))
