"""Alembic environment: runs migrations online against the configured URL."""

from __future__ import annotations

from alembic import context

from nexus.db.database import build_engine
from nexus.ledger.models import metadata

config = context.config


def run_migrations() -> None:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no sqlalchemy.url: use nexus.db.migrate, which sets it")
    engine = build_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
    finally:
        engine.dispose()


run_migrations()
