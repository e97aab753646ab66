"""Files that arrived as events (the files channel): their bytes, and the folder's sightings."""

from __future__ import annotations

from sqlalchemy import BigInteger, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.models.base import Base, Millis


class StoredFile(Base):
    """The bytes of a file the model may read (an image, a PDF, a text), kept under their
    own digest (`sha256:<hex>`), so a second copy of the same bytes is the same row. An
    event's attachment names it by that id; the engine reads it at turn time."""

    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    mime_type: Mapped[str | None] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[int] = mapped_column(Millis)


class FileSighting(Base):
    """A file in the watched folder seen by a scan but not yet recorded: its would-be event
    id (path, size and modification time in one digest) and when it was first seen. A later
    scan that sees the same id has seen the file unchanged, and records it."""

    __tablename__ = "file_sightings"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    seen_at: Mapped[int] = mapped_column(Millis)
