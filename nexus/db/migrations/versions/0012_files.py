"""The files channel: the bytes of files the model may read, and the folder's sightings.

`files` keeps an image's, a PDF's or a text's bytes under their digest (`sha256:<hex>`), so
an event's attachment can name them and any worker can hand them to the model, whether the
file came from the watched folder or an upload. `file_sightings` remembers the folder files
a scan saw but did not record yet (keyed by their would-be event id): a file is recorded
only once a later scan sees it unchanged.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("mime_type", sa.String(length=128), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    op.create_table(
        "file_sightings",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("seen_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_file_sightings")),
    )


def downgrade() -> None:
    op.drop_table("file_sightings")
    op.drop_table("files")
