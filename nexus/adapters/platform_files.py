"""Fetching a platform's file with its token: Telegram getFile, Slack url_private, WhatsApp
media ids, BlueBubbles attachment GUIDs. Capped in size and time; no URL (they hold tokens)
in any error or log."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from nexus.adapters.capped_read import read_capped, too_big
from nexus.engine.attachments import AttachmentUnavailable, Fetched

Fetch = Callable[[Mapping[str, Any]], Fetched]


class PlatformFiles:
    """An AttachmentSource over the platforms' HTTP APIs. The token goes only to the
    platform's own hosts; what it answers is read no further than `max_bytes`."""

    def __init__(
        self,
        *,
        max_bytes: int,
        timeout_s: float,
        telegram_token: str | None = None,
        telegram_api_base: str = "https://api.telegram.org",
        slack_token: str | None = None,
        whatsapp_token: str | None = None,
        whatsapp_api_base: str = "https://graph.facebook.com/v21.0",
        bluebubbles_url: str | None = None,
        bluebubbles_password: str | None = None,
        client: httpx.Client | None = None,
        stored: Fetch | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self._telegram = (telegram_token, telegram_api_base.rstrip("/"))
        self._slack = slack_token
        self._whatsapp = (whatsapp_token, whatsapp_api_base.rstrip("/"))
        bluebubbles_base = bluebubbles_url.rstrip("/") if bluebubbles_url else None
        self._bluebubbles = (bluebubbles_base, bluebubbles_password)
        self._client = client or httpx.Client(
            timeout=timeout_s, headers={"User-Agent": "nexus-broker"}, follow_redirects=False
        )
        self._by_platform: dict[str, Fetch] = {
            "telegram": self._from_telegram,
            "slack": self._from_slack,
            "whatsapp": self._from_whatsapp,
            "imessage": self._from_bluebubbles,  # the BlueBubbles adapter's platform
        }
        if stored is not None:
            # The files channel: bytes Nexus keeps itself (nexus.adapters.ledger_files).
            self._by_platform["files"] = stored

    def fetch(self, platform: str, attachment: Mapping[str, Any]) -> Fetched:
        how = self._by_platform.get(platform)
        if how is None:
            raise AttachmentUnavailable(f"files from {platform or 'this source'} are not fetched")
        try:
            return how(attachment)
        except httpx.TimeoutException as error:
            raise AttachmentUnavailable("the platform did not answer in time") from error
        except httpx.HTTPError as error:
            # httpx's message names the URL, and the URL may hold the token: say only what.
            raise AttachmentUnavailable(f"the download failed ({type(error).__name__})") from error

    def close(self) -> None:
        self._client.close()

    # -- per platform ------------------------------------------------------------------------

    def _from_telegram(self, attachment: Mapping[str, Any]) -> Fetched:
        token, base = self._telegram
        file_id = attachment.get("file_id")
        if not token or not file_id:
            raise AttachmentUnavailable("NEXUS_TELEGRAM_BOT_TOKEN is not set")
        found = self._json(f"{base}/bot{token}/getFile", params={"file_id": str(file_id)})
        result: dict[str, Any] = found["result"] if isinstance(found.get("result"), dict) else {}
        path = result.get("file_path")
        if not isinstance(path, str) or not path:
            raise AttachmentUnavailable("Telegram gave no file_path (a file over 20 MB?)")
        size = result.get("file_size")
        if isinstance(size, int) and size > self.max_bytes:
            raise AttachmentUnavailable(too_big(self.max_bytes))
        return self._download(f"{base}/file/bot{token}/{path}", {})

    def _from_slack(self, attachment: Mapping[str, Any]) -> Fetched:
        url = attachment.get("url")
        if not self._slack:
            raise AttachmentUnavailable("NEXUS_SLACK_BOT_TOKEN is not set")
        host = urlsplit(url).hostname if isinstance(url, str) else None
        # The bot token goes to Slack only, whatever URL a message carried.
        if not isinstance(url, str) or not host or not _is_host(host, "slack.com"):
            raise AttachmentUnavailable("the file has no slack.com URL")
        return self._download(url, {"Authorization": f"Bearer {self._slack}"})

    def _from_whatsapp(self, attachment: Mapping[str, Any]) -> Fetched:
        token, base = self._whatsapp
        media_id = attachment.get("file_id")
        if not token or not media_id:
            raise AttachmentUnavailable("NEXUS_WHATSAPP_ACCESS_TOKEN is not set")
        bearer = {"Authorization": f"Bearer {token}"}
        found = self._json(f"{base}/{media_id}", headers=bearer)
        url, size = found.get("url"), found.get("file_size")
        if isinstance(size, int) and size > self.max_bytes:
            raise AttachmentUnavailable(too_big(self.max_bytes))
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise AttachmentUnavailable("WhatsApp gave no URL for the media")
        return self._download(url, bearer)  # Meta's own answer: the media URL wants the token

    def _from_bluebubbles(self, attachment: Mapping[str, Any]) -> Fetched:
        base, password = self._bluebubbles
        guid = attachment.get("file_id")
        if not base or not password:
            raise AttachmentUnavailable(
                "NEXUS_BLUEBUBBLES_URL and NEXUS_BLUEBUBBLES_PASSWORD are not both set"
            )
        if not isinstance(guid, str) or not guid:
            raise AttachmentUnavailable("the file has no BlueBubbles attachment GUID")
        size = attachment.get("size")
        if isinstance(size, int) and size > self.max_bytes:
            raise AttachmentUnavailable(too_big(self.max_bytes))  # a HEIC only grows as a JPEG
        # BlueBubbles takes its password only as a query parameter; no error names the URL.
        url = f"{base}/api/v1/attachment/{quote(guid, safe='')}/download"
        return self._download(url, {}, params={"password": password})

    # -- HTTP --------------------------------------------------------------------------------

    def _json(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        response = self._client.get(url, params=params, headers=headers)
        if not response.is_success:
            raise AttachmentUnavailable(
                f"the platform refused the lookup (HTTP {response.status_code})"
            )
        try:
            found = response.json()
        except ValueError as error:
            raise AttachmentUnavailable("the platform's lookup answer is not JSON") from error
        return found if isinstance(found, dict) else {}

    def _download(
        self, url: str, headers: dict[str, str], params: dict[str, str] | None = None
    ) -> Fetched:
        with self._client.stream("GET", url, headers=headers, params=params) as response:
            if not response.is_success:
                raise AttachmentUnavailable(
                    f"the platform refused the download (HTTP {response.status_code})"
                )
            return read_capped(
                response,
                max_bytes=self.max_bytes,
                timeout_s=self.timeout_s,
                late="the platform did not answer in time",
                refuse=lambda reason, _permanent: AttachmentUnavailable(reason),
            )


def _is_host(host: str, domain: str) -> bool:
    return host == domain or host.endswith(f".{domain}")
