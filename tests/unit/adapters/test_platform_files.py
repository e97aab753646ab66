"""Fetching inbound files with the platforms' tokens, over real HTTP to a loopback fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus.adapters.platform_files import PlatformFiles
from nexus.engine.attachments import AttachmentUnavailable, Fetched
from tests.fakes.file_server import BEARER, TELEGRAM_TOKEN, FakeFiles

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 56


@pytest.fixture
def fake() -> Iterator[FakeFiles]:
    with FakeFiles() as server:
        yield server


def _files(fake: FakeFiles, **overrides: object) -> PlatformFiles:
    options: dict[str, object] = {
        "max_bytes": 1024,
        "timeout_s": 2.0,
        "telegram_token": TELEGRAM_TOKEN,
        "telegram_api_base": fake.base_url,
        "slack_token": BEARER,
        "whatsapp_token": BEARER,
        "whatsapp_api_base": f"{fake.base_url}/graph",
    }
    return PlatformFiles(**{**options, **overrides})  # type: ignore[arg-type]


def test_telegram_file_id_is_looked_up_then_downloaded(fake: FakeFiles) -> None:
    fake.add("AgACAgI", PNG, "image/png")
    fetched = _files(fake).fetch("telegram", {"kind": "image", "file_id": "AgACAgI"})
    assert fetched == Fetched(PNG, "image/png")
    assert [seen.path for seen in fake.seen] == [
        f"/bot{TELEGRAM_TOKEN}/getFile",
        f"/file/bot{TELEGRAM_TOKEN}/photos/AgACAgI.jpg",
    ]


def test_whatsapp_media_id_is_looked_up_then_downloaded_with_the_bearer(fake: FakeFiles) -> None:
    fake.add("65463453", PNG, "image/jpeg")
    fetched = _files(fake).fetch("whatsapp", {"file_id": "65463453"})
    assert fetched.data == PNG
    assert [s.headers.get("authorization") for s in fake.seen] == [f"Bearer {BEARER}"] * 2


def test_the_slack_token_goes_to_slack_hosts_only(fake: FakeFiles) -> None:
    files = _files(fake)
    with pytest.raises(AttachmentUnavailable, match=r"no slack\.com URL"):
        files.fetch("slack", {"url": f"{fake.base_url}/files-pri/T1-F1/a.png"})
    with pytest.raises(AttachmentUnavailable, match=r"no slack\.com URL"):
        files.fetch("slack", {"url": "https://files.slack.com.evil.example/a.png"})
    assert fake.seen == []  # the bearer token was sent nowhere


def test_a_file_over_the_cap_is_refused_whether_or_not_its_length_is_declared(
    fake: FakeFiles,
) -> None:
    fake.add("big", b"x" * 2048, "image/png")
    fake.add("quiet", b"x" * 2048, "image/png", no_length=True)
    fake.add("media-big", b"x" * 2048, "image/png", no_length=True)
    files = _files(fake)
    for platform, file_id in (
        ("telegram", "big"),
        ("telegram", "quiet"),
        ("whatsapp", "media-big"),
    ):
        with pytest.raises(AttachmentUnavailable, match="larger than NEXUS_ATTACHMENT_MAX_BYTES"):
            files.fetch(platform, {"file_id": file_id})


def test_a_slow_download_stops_at_the_timeout_and_no_error_names_the_token(
    fake: FakeFiles,
) -> None:
    fake.add("slow", b"x" * 200, "image/png", slow_s=0.02)
    files = _files(fake, timeout_s=0.3)
    reasons = []
    for platform, item in (
        ("telegram", {"file_id": "slow"}),
        ("telegram", {"file_id": "missing"}),
        ("discord", {"file_id": "x"}),
        ("telegram", {"file_id": None}),
    ):
        with pytest.raises(AttachmentUnavailable) as refused:
            files.fetch(platform, item)
        reasons.append(refused.value.reason)
    assert reasons == [
        "the platform did not answer in time",
        "the platform refused the lookup (HTTP 400)",
        "files from discord are not fetched",
        "NEXUS_TELEGRAM_BOT_TOKEN is not set",
    ]
    assert not any(TELEGRAM_TOKEN in reason for reason in reasons)


def test_a_refused_connection_is_reported_without_the_url(fake: FakeFiles) -> None:
    files = _files(fake, telegram_api_base="http://127.0.0.1:9")  # nothing listens on 9
    with pytest.raises(AttachmentUnavailable) as refused:
        files.fetch("telegram", {"file_id": "a"})
    assert refused.value.reason == "the download failed (ConnectError)"
    assert TELEGRAM_TOKEN not in str(refused.value)
