"""The files channel: a file becomes one event, from the watched folder or an upload.

Both doors build a `FileArrival` and hand it to `record_files`, which keeps the bytes of a
file the model can read (an image, a PDF, a UTF-8 text) in the ledger under their digest
and ingests the event in the same transaction. The event id is deterministic, so the
ledger's ON CONFLICT DO NOTHING stores each file once however often it is offered:

- a folder file's id digests its path relative to the folder, its size and its
  modification time in nanoseconds: a rescan, a second scanner or a restarted one computes
  the same id; a file rewritten (or touched) later is a new version and a new event;
- an upload's id digests the caller's namespace and the client's idempotency key, or, with
  none, the upload itself (name, label, text, metadata and bytes), so a retried request is
  stored once.

Which folder files are ready is decided here (`plan_scan`, pure); listing and reading the
folder is the adapter's (`nexus.adapters.files_folder`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.attachments import DOCUMENT_TYPES, IMAGE_TYPES, describe, is_text
from nexus.event import Attachment, Author, Container, NexusEvent
from nexus.ingest.service import Ingested, ingest

FILES = "files"  # the adapter and platform of every file event
FOLDER = "folder"  # the container (and sender) of the watched folder's files
UPLOADS = "uploads"  # the container of uploads that name no label
# Names a writer uses while it writes: never read. Writing `report.pdf.partial` (or
# `.report.pdf`) and renaming it to `report.pdf` when done is the one sure way to hand
# Nexus a file: a rename within one filesystem is atomic.
TEMPORARY_SUFFIXES = (".partial", ".part", ".tmp", ".crdownload", ".download", ".swp", "~")
# A text file is handed to the model whole, so it must fit a context with room to spare.
TEXT_MAX_BYTES = 200_000

Readable = Literal["image", "document", "text"]


@dataclass(frozen=True)
class Listed:
    """One regular file in the watched folder, as a listing saw it."""

    path: str  # relative to the folder, '/'-separated
    size: int
    mtime_ns: int


def is_temporary(path: str) -> bool:
    """A file still being written by a writer that renames it into place when done: a
    hidden name (in any directory of its path) or a temporary suffix."""
    parts = path.split("/")
    return any(part.startswith(".") for part in parts) or parts[-1].endswith(TEMPORARY_SUFFIXES)


def _digest(*parts: str | bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        # Each part's length first, so ("ab", "c") and ("a", "bc") differ.
        hashed.update(len(data).to_bytes(8, "big") + data)
    return hashed.hexdigest()


def folder_event_id(listed: Listed) -> str:
    """The event id of this version of a folder file (its path may be long, or odd)."""
    return f"{FILES}:{FOLDER}:{_digest(listed.path, str(listed.size), str(listed.mtime_ns))[:40]}"


def upload_event_id(namespace: str, key: str) -> str:
    return f"{FILES}:upload:{_digest(namespace, key)[:40]}"


def upload_key(name: str, label: str | None, text: str | None, metadata: Any, data: bytes) -> str:
    """An upload's idempotency key when the client gives none: the upload itself."""
    shown = json.dumps(metadata, sort_keys=True, default=str)
    return "content:" + _digest(name, label or "", text or "", shown, data)


def file_id(data: bytes) -> str:
    """Where a file's bytes are kept in the ledger: their digest."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


# --- which folder files are ready (pure) ------------------------------------------------


@dataclass(frozen=True)
class ScanPlan:
    """What one scan does: record these files; remember these ids as seen (first sightings);
    forget these sightings (their file changed or went away)."""

    record: tuple[Listed, ...]
    sight: tuple[str, ...]
    forget: tuple[str, ...]


def plan_scan(
    listing: Sequence[Listed],
    *,
    recorded: Collection[str],
    sightings: Mapping[str, int],
    now_ms: int,
    settle_ms: int,
) -> ScanPlan:
    """A file is recorded once an earlier scan, at least `settle_ms` before this one, saw it
    with the same size and modification time (the same id): a writer appending to it since
    would have changed one of them. Files recorded already are left alone; temporary names
    are never looked at."""
    record: list[Listed] = []
    sight: list[str] = []
    current: set[str] = set()
    for listed in sorted(listing, key=lambda item: item.path):
        if is_temporary(listed.path):
            continue
        event_id = folder_event_id(listed)
        if event_id in recorded:
            continue
        current.add(event_id)
        seen_at = sightings.get(event_id)
        if seen_at is None:
            sight.append(event_id)
        elif seen_at <= now_ms - settle_ms:
            record.append(listed)
    forget = tuple(sorted(set(sightings) - current))
    return ScanPlan(record=tuple(record), sight=tuple(sight), forget=forget)


# --- what a file becomes (pure) ---------------------------------------------------------


def _mime(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


def readable(mime_type: str | None, size: int, *, max_bytes: int) -> Readable | None:
    """How the model reads a file of this type and size, or None (it gets a note)."""
    mime = _mime(mime_type)
    if mime in IMAGE_TYPES and size <= max_bytes:
        return "image"
    if mime in DOCUMENT_TYPES and size <= max_bytes:
        return "document"
    if is_text(mime) and size <= min(max_bytes, TEXT_MAX_BYTES):
        return "text"
    return None


def why_unreadable(mime_type: str | None, size: int, *, max_bytes: int) -> str:
    mime = _mime(mime_type)
    if mime in IMAGE_TYPES | DOCUMENT_TYPES and size > max_bytes:
        return f"larger than NEXUS_ATTACHMENT_MAX_BYTES ({max_bytes} bytes)"
    if is_text(mime):
        return f"a text larger than {min(max_bytes, TEXT_MAX_BYTES)} bytes"
    return "not a type the model reads (images, PDFs and text are)"


@dataclass(frozen=True)
class FileArrival:
    """A file offered to the ledger, with its bytes when the model can read them."""

    event_id: str
    name: str
    mime_type: str | None
    size: int
    data: bytes | None  # None: recorded as a note only
    shape: Readable | None  # how the model reads `data`
    container: str
    sender: str
    occurred_at: int
    text: str | None = None
    note: str | None = None  # why the bytes are not kept (with data None)
    raw: dict[str, Any] = field(default_factory=dict)


def arrival_of(
    *,
    event_id: str,
    name: str,
    mime_type: str | None,
    data: bytes | None,
    size: int,
    container: str,
    sender: str,
    occurred_at: int,
    max_bytes: int,
    text: str | None = None,
    raw: dict[str, Any] | None = None,
) -> FileArrival:
    """The arrival of a file: its bytes kept when the model can read them (a text only
    when it is UTF-8), a note saying why not otherwise. `data` may be None for a file
    whose type says it is not read (the folder does not read those)."""
    shape = readable(mime_type, size, max_bytes=max_bytes)
    note: str | None = None
    kept = data if shape is not None else None
    if shape is None:
        note = why_unreadable(mime_type, size, max_bytes=max_bytes)
    elif data is None:
        note = "its bytes could not be read"
    elif shape == "text":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            kept, note = None, "not UTF-8 text"
    return FileArrival(
        event_id=event_id,
        name=name,
        mime_type=_mime(mime_type) or None,
        size=size,
        data=kept,
        shape=shape if kept is not None else None,
        container=container,
        sender=sender,
        occurred_at=occurred_at,
        text=text,
        note=note,
        raw=dict(raw or {}),
    )


def _kind(mime: str, shape: Readable | None) -> str:
    if shape == "image":
        return "image"
    if shape is not None:
        return "document"
    major = mime.split("/", 1)[0]
    return major if major in ("image", "audio", "video") else "file"


def file_event(arrival: FileArrival) -> NexusEvent:
    """The event of a file: a readable one as an attachment that names its kept bytes;
    any other as a line in the text (name, type, size) saying why the model cannot read it."""
    mime = arrival.mime_type or ""
    kept = arrival.data is not None
    item = Attachment(
        kind=_kind(mime, arrival.shape),
        file_id=file_id(arrival.data) if arrival.data is not None else None,
        mime_type=arrival.mime_type,
        name=arrival.name[-255:],
        size=arrival.size,
    )
    lines = [arrival.text] if arrival.text else []
    if not kept:
        lines.append(f"{describe(item.model_dump())} (not shown to the model: {arrival.note})")
    raw = {**arrival.raw, "name": arrival.name, "size": arrival.size, "note": arrival.note}
    return NexusEvent(
        id=arrival.event_id,
        adapter=FILES,
        platform=FILES,
        sender=Author(id=arrival.sender),
        container=Container(kind="channel", id=arrival.container),
        text="\n".join(lines) or None,
        attachments=(item,) if kept else (),
        occurred_at=arrival.occurred_at,
        raw={key: value for key, value in raw.items() if value is not None},
    )


# --- into the ledger --------------------------------------------------------------------


def record_files(
    uow: UnitOfWork, arrivals: Sequence[FileArrival], doorbell: Doorbell
) -> list[Ingested]:
    """Keep the readable files' bytes and ingest their events, in the caller's unit of
    work (the caller commits; the doorbells ring after). A file offered twice is stored
    once: the second event is a duplicate, its bytes the same row."""
    for arrival in arrivals:
        if arrival.data is not None:
            uow.ledger.files.put(file_id(arrival.data), arrival.data, arrival.mime_type)
    return ingest(uow, [file_event(arrival) for arrival in arrivals], doorbell)


class Folder(Protocol):
    """The watched folder (nexus.adapters.files_folder)."""

    def listing(self) -> list[Listed]:
        """Every regular file under the folder, temporary names included."""
        ...

    def mime_type(self, listed: Listed) -> str | None:
        """The file's type, from its name."""
        ...

    def read(self, listed: Listed) -> bytes | None:
        """The file's bytes, or None when it is gone or no longer as listed."""
        ...


@dataclass(frozen=True)
class Scanned:
    listed: int
    sighted: int
    recorded: int  # events stored by this scan (a concurrent scanner's are not counted)


def scan_folder(
    database: Database,
    folder: Folder,
    doorbell: Doorbell,
    *,
    now_ms: int,
    settle_ms: int,
    max_bytes: int,
) -> Scanned:
    """One scan: plan (and remember first sightings) in one transaction, read the ready
    files outside it, then record them in another. Two scanners at once both read a ready
    file; the ledger stores its event once."""
    listing = folder.listing()
    by_id = {folder_event_id(listed): listed for listed in listing}
    with database.unit_of_work() as uow:
        files = uow.ledger.files
        plan = plan_scan(
            listing,
            recorded=files.recorded(list(by_id)),
            sightings=files.sightings(),
            now_ms=now_ms,
            settle_ms=settle_ms,
        )
        files.sight(plan.sight, now_ms)
        files.forget_sightings(plan.forget)
        uow.commit()
    arrivals: list[FileArrival] = []
    for listed in plan.record:
        mime = folder.mime_type(listed)
        wanted = readable(mime, listed.size, max_bytes=max_bytes) is not None
        data = folder.read(listed) if wanted else None
        if wanted and data is None:
            continue  # changed or gone since the listing: its new version is sighted anew
        arrivals.append(
            arrival_of(
                event_id=folder_event_id(listed),
                name=listed.path,
                mime_type=mime,
                data=data,
                size=listed.size,
                container=FOLDER,
                sender=FOLDER,
                occurred_at=listed.mtime_ns // 1_000_000,
                max_bytes=max_bytes,
                raw={"path": listed.path, "mtime_ns": listed.mtime_ns},
            )
        )
    stored = 0
    if arrivals:
        with database.unit_of_work() as uow:
            results = record_files(uow, arrivals, doorbell)
            uow.ledger.files.forget_sightings([a.event_id for a in arrivals])
            uow.commit()
        stored = sum(result.stored for result in results)
    return Scanned(listed=len(listing), sighted=len(plan.sight), recorded=stored)


def upload_arrival(
    *,
    namespace: str,
    name: str,
    mime_type: str | None,
    data: bytes,
    label: str | None,
    text: str | None,
    metadata: dict[str, Any] | None,
    key: str | None,
    occurred_at: int,
    max_bytes: int,
) -> FileArrival:
    """An uploaded file's arrival: `namespace` is the caller's (its token's digest prefix),
    `key` the client's idempotency key (None: the upload itself is the key)."""
    event_key = key if key else upload_key(name, label, text, metadata, data)
    raw: dict[str, Any] = {"label": label, "metadata": metadata, "key": key}
    return arrival_of(
        event_id=upload_event_id(namespace, event_key),
        name=name,
        mime_type=mime_type,
        data=data,
        size=len(data),
        container=label or UPLOADS,
        sender=f"token:{namespace}",
        occurred_at=occurred_at,
        max_bytes=max_bytes,
        text=text,
        raw={k: v for k, v in raw.items() if v is not None},
    )
