"""The files channel's decisions: which folder files are ready, their ids, what a file
becomes (an attachment the model reads, or a note in the text)."""

from __future__ import annotations

from nexus.ingest.files import (
    FOLDER,
    FileArrival,
    Listed,
    arrival_of,
    file_event,
    file_id,
    folder_event_id,
    is_temporary,
    plan_scan,
    upload_arrival,
)

SETTLE = 30_000
NOW = 10_000_000
REPORT = Listed("reports/q3.pdf", 1200, 1_700_000_000_123_456_789)


def test_the_id_is_the_same_for_the_same_version_and_new_for_a_new_one() -> None:
    assert folder_event_id(REPORT) == folder_event_id(Listed(REPORT.path, 1200, REPORT.mtime_ns))
    assert folder_event_id(REPORT).startswith("files:folder:")
    grown = Listed(REPORT.path, 1201, REPORT.mtime_ns)
    touched = Listed(REPORT.path, 1200, REPORT.mtime_ns + 1)
    moved = Listed("q3.pdf", 1200, REPORT.mtime_ns)
    ids = {folder_event_id(x) for x in (REPORT, grown, touched, moved)}
    assert len(ids) == 4
    assert len(folder_event_id(Listed("x/" * 500 + "long.txt", 1, 1))) < 255


def test_temporary_and_hidden_names_are_never_read() -> None:
    for path in ("a.pdf.partial", "a.part", "a.tmp", ".a.pdf", ".sync/a.pdf", "a.txt~"):
        assert is_temporary(path), path
    assert not is_temporary("a.pdf") and not is_temporary("partial/a.pdf")


def test_a_new_file_is_sighted_first_and_recorded_by_a_later_scan() -> None:
    first = plan_scan([REPORT], recorded=set(), sightings={}, now_ms=NOW, settle_ms=SETTLE)
    assert first.record == () and first.sight == (folder_event_id(REPORT),)
    seen = {folder_event_id(REPORT): NOW}
    later = plan_scan(
        [REPORT], recorded=set(), sightings=seen, now_ms=NOW + SETTLE, settle_ms=SETTLE
    )
    assert later.record == (REPORT,) and later.sight == () and later.forget == ()


def test_a_second_scan_too_soon_after_the_first_records_nothing() -> None:
    seen = {folder_event_id(REPORT): NOW}
    soon = plan_scan([REPORT], recorded=set(), sightings=seen, now_ms=NOW + 5, settle_ms=SETTLE)
    assert soon.record == () and soon.sight == ()


def test_a_file_growing_between_scans_is_a_new_sighting_and_the_old_one_is_forgotten() -> None:
    seen = {folder_event_id(REPORT): NOW}
    grown = Listed(REPORT.path, 5000, REPORT.mtime_ns + 10)
    plan = plan_scan([grown], recorded=set(), sightings=seen, now_ms=NOW + SETTLE, settle_ms=SETTLE)
    assert plan.record == ()
    assert plan.sight == (folder_event_id(grown),)
    assert plan.forget == (folder_event_id(REPORT),)


def test_recorded_and_temporary_files_are_left_alone() -> None:
    partial = Listed("big.iso.partial", 10, 1)
    plan = plan_scan(
        [REPORT, partial],
        recorded={folder_event_id(REPORT)},
        sightings={},
        now_ms=NOW,
        settle_ms=SETTLE,
    )
    assert plan == plan.__class__(record=(), sight=(), forget=())


def _arrival(name: str, mime: str | None, data: bytes, max_bytes: int = 1_000_000) -> FileArrival:
    return arrival_of(
        event_id="files:folder:x",
        name=name,
        mime_type=mime,
        data=data,
        size=len(data),
        container=FOLDER,
        sender=FOLDER,
        occurred_at=1,
        max_bytes=max_bytes,
    )


def test_an_image_a_pdf_and_a_text_become_attachments_naming_their_kept_bytes() -> None:
    for name, mime, kind in (
        ("a.png", "image/png", "image"),
        ("a.pdf", "application/pdf", "document"),
        ("a.md", "text/markdown", "document"),
    ):
        event = file_event(_arrival(name, mime, b"bytes of " + name.encode()))
        [item] = event.attachments
        assert item.kind == kind and item.file_id == file_id(b"bytes of " + name.encode())
        assert item.name == name and item.mime_type == mime
        assert event.text is None and event.routable
        assert event.adapter == event.platform == "files"


def test_other_files_are_a_note_in_the_text_without_their_bytes() -> None:
    cases = {
        ("a.zip", "application/zip", b"PK\x03\x04"): "not a type the model reads",
        ("a.png", "image/png", b"\x89PNG" + b"0" * 2000): "larger than NEXUS_ATTACHMENT_MAX_BYTES",
        ("a.txt", "text/plain", b"\xff\xfe\x00bad"): "not UTF-8 text",
    }
    for (name, mime, data), why in cases.items():
        arrival = _arrival(name, mime, data, max_bytes=1024)
        assert arrival.data is None
        event = file_event(arrival)
        assert event.attachments == ()
        assert event.text is not None and f'"{name}", {mime}' in event.text and why in event.text


def test_an_upload_is_keyed_by_its_content_or_by_the_clients_key() -> None:
    def upload(data: bytes, key: str | None = None, namespace: str = "abcd1234") -> str:
        return upload_arrival(
            namespace=namespace,
            name="a.txt",
            mime_type="text/plain",
            data=data,
            label="ops",
            text="see attached",
            metadata={"from": "scanner"},
            key=key,
            occurred_at=1,
            max_bytes=1000,
        ).event_id

    assert upload(b"one") == upload(b"one") != upload(b"two")
    assert upload(b"one", key="k1") == upload(b"two", key="k1") != upload(b"one", key="k2")
    assert upload(b"one", namespace="other") != upload(b"one")
