"""`nexus doctor` says what a half-configured BlueBubbles (iMessage) is missing, and pings a
configured server with its password, never showing it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus.doctor import check_bluebubbles
from nexus.settings import Settings
from tests.fakes.bluebubbles_server import FakeBlueBubbles

PASSWORD = "doctor-never-shows-9"


@pytest.fixture
def server() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as fake:
        yield fake


def test_off_is_fine_and_half_configured_names_what_is_missing() -> None:
    assert check_bluebubbles(Settings()).status == "ok"
    only_url = check_bluebubbles(Settings(bluebubbles_url="http://mac.lan:1234"))
    assert only_url.status == "fail"
    assert "NEXUS_BLUEBUBBLES_PASSWORD not set" in only_url.detail
    assert "NEXUS_BLUEBUBBLES_URL" not in only_url.detail
    only_secret = check_bluebubbles(Settings(bluebubbles_webhook_secret="s3"))
    assert only_secret.status == "fail"
    assert "NEXUS_BLUEBUBBLES_URL and NEXUS_BLUEBUBBLES_PASSWORD not set" in only_secret.detail
    assert only_secret.fix is not None and "NEXUS_BLUEBUBBLES_URL" in only_secret.fix


def test_a_configured_server_is_pinged_with_its_password(server: FakeBlueBubbles) -> None:
    settings = Settings(
        bluebubbles_url=server.url,
        bluebubbles_password=PASSWORD,
        bluebubbles_webhook_secret="hook",
        public_url="https://bot.example.com",
    )
    check = check_bluebubbles(settings)
    assert check.status == "ok", check
    assert "https://bot.example.com/v1/inbound/bluebubbles?secret=<" in check.detail
    [ping] = server.of("ping")
    assert ping.query == {"password": PASSWORD}
    assert PASSWORD not in f"{check}"


def test_a_wrong_password_or_no_server_fails_without_showing_it(server: FakeBlueBubbles) -> None:
    wrong = check_bluebubbles(Settings(bluebubbles_url=server.url, bluebubbles_password="nope"))
    assert wrong.status == "fail" and "refused NEXUS_BLUEBUBBLES_PASSWORD" in wrong.detail
    gone = Settings(bluebubbles_url="http://127.0.0.1:9", bluebubbles_password=PASSWORD)
    down = check_bluebubbles(gone, timeout_s=2)
    assert down.status == "fail" and "cannot reach http://127.0.0.1:9" in down.detail
    assert PASSWORD not in f"{wrong}{down}"
