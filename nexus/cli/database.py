"""`nexus db upgrade`: migrations, the one CLI command (with `nexus doctor`, `nexus dev` and
the process commands) that reaches the database itself rather than the API."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from nexus.settings import Settings

console = Console()
errors = Console(stderr=True)


def upgrade(settings: Settings, revision: str) -> None:
    """Apply migrations up to `revision` and say which revision the database is at."""
    from nexus.db.database import build_engine
    from nexus.db.migrate import current_revision
    from nexus.db.migrate import upgrade as migrate

    try:
        migrate(settings.database_url, revision)
        engine = build_engine(settings.database_url)
        try:
            reached = current_revision(engine)
        finally:
            engine.dispose()
    except Exception as error:
        errors.print(f"[red]migration failed[/red]: {type(error).__name__}: {escape(str(error))}")
        raise typer.Exit(1) from error
    console.print(f"database is at revision [bold]{reached}[/bold]")
