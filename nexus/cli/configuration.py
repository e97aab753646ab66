"""The settings a command runs with: a configuration error is said, and exits 2."""

from __future__ import annotations

import typer
from pydantic import ValidationError
from rich.console import Console

from nexus.settings import Settings, get_settings

errors = Console(stderr=True)


def settings_or_exit() -> Settings:
    """The settings from the environment; a bad one printed with its reason, exit status 2."""
    try:
        return get_settings()
    except ValidationError as error:
        errors.print(f"[red]configuration error[/red]: {error}")
        raise typer.Exit(2) from error
