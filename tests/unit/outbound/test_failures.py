"""What a refusal's log line may carry: the HTTP status and a short, credential-free excerpt."""

from __future__ import annotations

from nexus.outbound.failures import EXCERPT_CHARS, excerpt, http_status


def test_the_status_is_read_from_an_http_answer_only() -> None:
    assert http_status("HTTP 403: Forbidden: bot was blocked by the user") == 403
    assert http_status("ConnectError: [Errno 111] Connection refused") is None
    assert http_status("NEXUS_TELEGRAM_BOT_TOKEN is not set") is None


def test_an_excerpt_is_bounded_and_blanks_credentials_in_urls() -> None:
    long = "HTTP 400: " + "x" * 5_000
    assert len(excerpt(long)) == EXCERPT_CHARS and excerpt(long).endswith("…")
    assert excerpt("short") == "short"
    cleaned = excerpt("POST https://api.telegram.org/bot123:AAE-secret_x/sendMessage failed")
    assert "AAE-secret_x" not in cleaned and "/bot[redacted]/sendMessage" in cleaned
    assert "hunter2" not in excerpt("GET https://ops:hunter2@hooks.example/reply: 401")
    leaked = excerpt("GET http://mac.lan:1234/api/v1/ping?password=s3cr%40t&x=1: 401")
    assert "s3cr" not in leaked and "?password=[redacted]&x=1" in leaked
