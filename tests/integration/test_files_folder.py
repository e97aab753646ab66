"""The watched folder through the real scanner, a real directory and a real ledger: each
file is one event, however often, by however many scanners, and never read half-written."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

from nexus.adapters.files_folder import FolderFiles
from nexus.db import Database
from nexus.doctor import check_files, folder_problem
from nexus.doorbell import RecordingDoorbell
from nexus.ingest.files import Listed, Scanned, file_id, folder_event_id, scan_folder
from nexus.ledger.models import Event, StoredFile, table_of
from nexus.settings import Settings

SETTLE_MS = 30_000
START = 1_767_225_600_000


class Scanner:
    """One scanner process's view: its own folder object and its own database pool."""

    def __init__(self, url: str, root: Path, folder: FolderFiles | None = None) -> None:
        self.database = Database(url)
        self.folder = folder or FolderFiles(root)
        self.doorbell = RecordingDoorbell()

    def scan(self, now_ms: int) -> Scanned:
        return scan_folder(
            self.database,
            self.folder,
            self.doorbell,
            now_ms=now_ms,
            settle_ms=SETTLE_MS,
            max_bytes=100_000,
        )

    def close(self) -> None:
        self.database.close()


def _events(database: Database) -> list[tuple[str, str | None, list[dict[str, object]]]]:
    events = table_of(Event)
    with database.unit_of_work() as uow:
        rows = uow.connection.execute(
            select(events.c.id, events.c.text, events.c.attachments).where(
                events.c.adapter == "files"
            )
        ).all()
    return [(row.id, row.text, list(row.attachments)) for row in rows]


def _kept(database: Database) -> int:
    with database.unit_of_work() as uow:
        count = select(func.count()).select_from(table_of(StoredFile))
        return int(uow.connection.execute(count).scalar_one())


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    """The watched folder (apart from the SQLite ledger that tmp_path also holds)."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def _url(database: Database) -> str:
    return database.engine.url.render_as_string(hide_password=False)


def test_a_file_is_recorded_once_however_often_it_is_scanned(
    database: Database, inbox: Path
) -> None:
    (inbox / "notes.txt").write_text("buy milk")
    (inbox / "sub").mkdir()
    (inbox / "sub" / "archive.zip").write_bytes(b"PK\x03\x04 zipped")
    scanner = Scanner(_url(database), inbox)
    try:
        assert scanner.scan(START).recorded == 0  # first sighting: not read yet
        assert _events(database) == []
        assert scanner.scan(START + SETTLE_MS).recorded == 2
        assert scanner.scan(START + 2 * SETTLE_MS).recorded == 0
        assert scanner.scan(START + 3 * SETTLE_MS) == Scanned(listed=2, sighted=0, recorded=0)
    finally:
        scanner.close()
    found = {text or "": attachments for _, text, attachments in _events(database)}
    assert len(found) == 2
    assert found[""] == [
        {
            "kind": "document",
            "file_id": file_id(b"buy milk"),
            "mime_type": "text/plain",
            "name": "notes.txt",
            "size": 8,
        }
    ]
    [note] = [text for text in found if text]
    assert 'file "sub/archive.zip", application/zip, 11 bytes' in note
    assert _kept(database) == 1  # the text's bytes; the zip's are not kept
    # Left in place: the ledger, not the folder, remembers what was recorded.
    assert (inbox / "notes.txt").exists()


def test_a_restarted_scanner_records_nothing_again_and_keeps_the_first_sighting(
    database: Database, inbox: Path
) -> None:
    (inbox / "a.pdf").write_bytes(b"%PDF-1.4 one")
    first = Scanner(_url(database), inbox)
    first.scan(START)
    first.close()
    # A new process: the sighting the first one left is in the ledger.
    second = Scanner(_url(database), inbox)
    assert second.scan(START + SETTLE_MS).recorded == 1
    second.close()
    third = Scanner(_url(database), inbox)
    assert third.scan(START + 5 * SETTLE_MS).recorded == 0
    third.close()
    assert len(_events(database)) == 1


class MeetingFolder(FolderFiles):
    """A folder whose reads wait for the other scanner's: both are between planning and
    recording at once (an order, not a timing)."""

    def __init__(self, root: Path, meeting: threading.Barrier) -> None:
        super().__init__(root)
        self.meeting = meeting

    def read(self, listed: Listed) -> bytes | None:
        self.meeting.wait(timeout=30)
        return super().read(listed)


def test_two_scanners_at_once_store_the_file_once(pg_database: Database, inbox: Path) -> None:
    (inbox / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n pixels")
    meeting = threading.Barrier(2)
    scanners = [Scanner(_url(pg_database), inbox, MeetingFolder(inbox, meeting)) for _ in range(2)]
    scanners[0].scan(START)  # the sighting, by either
    results: list[Scanned] = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(s.scan(START + SETTLE_MS)))
        for s in scanners
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for scanner in scanners:
        scanner.close()
    assert sorted(r.recorded for r in results) == [0, 1]
    assert len(_events(pg_database)) == 1 and _kept(pg_database) == 1


def test_a_file_still_being_written_is_not_read_until_it_stops_changing(
    database: Database, inbox: Path
) -> None:
    growing = inbox / "log.txt"
    growing.write_text("first half")
    scanner = Scanner(_url(database), inbox)
    try:
        scanner.scan(START)
        with growing.open("a") as handle:  # the writer goes on between the scans
            handle.write(", second half")
        os.utime(growing, ns=(START * 1_000_000, START * 1_000_000 + 1))
        assert scanner.scan(START + SETTLE_MS).recorded == 0  # changed: a new sighting
        assert scanner.scan(START + 2 * SETTLE_MS).recorded == 1
    finally:
        scanner.close()
    [(_, _, [attachment])] = _events(database)
    assert attachment["file_id"] == file_id(b"first half, second half")


def test_a_partial_name_is_never_read_and_its_rename_is_recorded(
    database: Database, inbox: Path
) -> None:
    partial = inbox / "scan.pdf.partial"
    partial.write_bytes(b"%PDF-1.4 half")
    scanner = Scanner(_url(database), inbox)
    try:
        for n in range(3):
            assert scanner.scan(START + n * SETTLE_MS) == Scanned(1, 0, 0)
        partial.rename(inbox / "scan.pdf")
        scanner.scan(START + 3 * SETTLE_MS)
        assert scanner.scan(START + 4 * SETTLE_MS).recorded == 1
    finally:
        scanner.close()
    assert len(_events(database)) == 1


def test_a_read_that_finds_the_file_changed_since_the_listing_gives_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("abc")
    folder = FolderFiles(tmp_path)
    [listed] = folder.listing()
    assert folder.read(listed) == b"abc"
    path.write_text("abcdef")
    assert folder.read(listed) is None
    assert folder.read(Listed("gone.txt", 1, 1)) is None
    assert folder_event_id(listed) != folder_event_id(folder.listing()[0])


def test_links_are_not_followed_and_hidden_directories_not_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    root = tmp_path / "watched"
    (root / ".cache").mkdir(parents=True)
    (root / ".cache" / "x.txt").write_text("x")
    (root / "link.txt").symlink_to(outside)
    (root / "real.txt").write_text("real")
    assert [listed.path for listed in FolderFiles(root).listing()] == ["real.txt"]


def test_the_doctor_names_a_missing_or_unreadable_folder(tmp_path: Path) -> None:
    assert folder_problem(tmp_path) is None
    assert folder_problem(tmp_path / "nope") == f"{tmp_path / 'nope'} does not exist"
    afile = tmp_path / "f"
    afile.write_text("")
    assert folder_problem(afile) == f"{afile} is not a directory"
    missing = check_files(Settings(files_dir=str(tmp_path / "nope")))
    assert missing.status == "fail" and "does not exist" in missing.detail
    assert check_files(Settings()).status == "ok"
    assert check_files(Settings(files_dir=str(tmp_path))).detail == f"watching {tmp_path}"


def test_the_worker_task_scans_the_configured_folder(tmp_path: Path) -> None:
    from nexus.bootstrap import bootstrap_worker
    from nexus.db.migrate import upgrade
    from workers import tasks

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "scan.pdf").write_bytes(b"%PDF-1.4 scanned")
    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url)
    settings = Settings(database_url=url, files_dir=str(inbox), files_settle_seconds=0)
    graph = bootstrap_worker(settings)
    try:
        assert tasks._runtime() is graph
        assert tasks.files_scan() == 0  # sighted
        assert tasks.files_scan() == 1  # unchanged since: recorded
        assert tasks.files_scan() == 0
        [(_, _, [attachment])] = _events(graph.database)
        assert attachment["name"] == "scan.pdf" and attachment["kind"] == "document"
    finally:
        graph.close()
