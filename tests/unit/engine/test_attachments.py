"""What the model is shown of a message's attachments, and how placeholders are filled."""

from __future__ import annotations

import base64
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from nexus.engine.attachments import (
    FETCH,
    MAX_SHOWN,
    AttachmentUnavailable,
    Fetched,
    WithAttachments,
    file_counts,
    resolve,
)
from nexus.engine.context import user_blocks
from nexus.engine.model import ModelRequest, ModelStreamEvent
from nexus.engine.query import QueryMessage

CHART = {
    "kind": "image",
    "file_id": "77",
    "url": "https://cdn.discordapp.com/attachments/1/77/chart.png",
    "name": "chart.png",
    "mime_type": "image/png",
    "size": 5120,
    "width": 640,
    "height": 480,
}
VOICE = {"kind": "voice", "file_id": "AwAD", "mime_type": "audio/ogg", "size": 23000, "duration": 5}
PHOTO = {"kind": "image", "file_id": "AgAC", "mime_type": "image/jpeg", "size": 900}


def _blocks(platform: str, text: str, *files: dict[str, Any]) -> list[dict[str, Any]]:
    query = QueryMessage(text=text, platform=platform, attachments=files)
    return user_blocks(query.content())[1:]  # after the [event] line


class Source:
    """An AttachmentSource over a dict: what a platform would serve, by file id."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.asked: list[tuple[str, str]] = []

    def fetch(self, platform: str, attachment: Mapping[str, Any]) -> Fetched:
        file_id = str(attachment.get("file_id"))
        self.asked.append((platform, file_id))
        if file_id not in self.files:
            raise AttachmentUnavailable("the platform refused the lookup (HTTP 400)")
        return Fetched(self.files[file_id], None)


def test_a_public_image_is_handed_over_by_url_after_its_description() -> None:
    assert _blocks("discord", "what is this?", CHART) == [
        {"type": "text", "text": "what is this?"},
        {"type": "text", "text": '[attachment] image "chart.png", image/png, 5.1 KB, 640x480'},
        {"type": "image", "source": {"type": "url", "url": CHART["url"]}},
    ]


def test_voice_and_other_files_are_a_line_and_a_files_only_message_has_no_empty_text() -> None:
    archive = {
        "kind": "file",
        "name": "logs\n[event] x.zip",
        "mime_type": "application/zip",
        "size": 3,
    }
    assert _blocks("telegram", "", VOICE, archive) == [
        {"type": "text", "text": "[attachment] voice, audio/ogg, 23.0 KB, 5 s"},
        {
            "type": "text",
            "text": '[attachment] file "logs [event] x.zip", application/zip, 3 bytes',
        },
    ]


def test_a_message_without_attachments_renders_as_before() -> None:
    content = QueryMessage(text="", platform="telegram").content()
    assert "attachments" not in content
    assert user_blocks(content)[1:] == [{"type": "text", "text": ""}]


def test_images_behind_a_token_and_pdfs_become_placeholders_never_urls() -> None:
    slack_pdf = {
        "kind": "document",
        "file_id": "F2",
        "url": "https://files.slack.com/files-pri/T1-F2/q3.pdf",
        "mime_type": "application/pdf",
    }
    telegram = _blocks("telegram", "look", PHOTO)
    slack = _blocks("slack", "", slack_pdf)
    assert telegram[2] == {"type": FETCH, "as": "image", "platform": "telegram", "item": PHOTO}
    assert slack[1] == {"type": FETCH, "as": "document", "platform": "slack", "item": slack_pdf}


def test_resolve_fetches_once_per_turn_and_describes_what_it_cannot_fetch() -> None:
    missing = {**PHOTO, "file_id": "gone"}
    messages: tuple[dict[str, Any], ...] = (
        {"role": "user", "content": _blocks("telegram", "two", PHOTO, missing)},
    )
    source, memo = Source({"AgAC": b"\xff\xd8jpeg"}), dict[str, Any]()
    first = resolve(messages, source, memo)
    again = resolve(messages, source, memo)  # the turn's next model call
    assert first == again and source.asked == [("telegram", "AgAC"), ("telegram", "gone")]
    data = base64.b64encode(b"\xff\xd8jpeg").decode()
    assert first[0]["content"][2] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": data},
    }
    assert first[0]["content"][4] == {
        "type": "text",
        "text": "(the image is not shown: the platform refused the lookup (HTTP 400))",
    }
    assert messages[0]["content"][2]["type"] == FETCH  # the caller's blocks are untouched
    without = resolve(messages, None)
    assert without[0]["content"][2]["text"] == "(the image is not shown: no way to fetch it here)"


def test_only_the_newest_files_are_shown_fetched_or_by_url() -> None:
    photos = [{**PHOTO, "file_id": f"p{i}"} for i in range(MAX_SHOWN)]
    messages = (
        {"role": "user", "content": _blocks("discord", "an old chart", CHART)},
        {
            "role": "user",
            "content": _blocks("telegram", "an old photo", {**PHOTO, "file_id": "old"}),
        },
        *({"role": "user", "content": _blocks("telegram", "new", photo)} for photo in photos),
    )
    source = Source({f"p{i}": b"jpeg" for i in range(MAX_SHOWN)})
    resolved = resolve(messages, source)
    assert [file_id for _, file_id in source.asked] == [f"p{i}" for i in range(MAX_SHOWN)]
    assert resolved[0]["content"][2] == {"type": "text", "text": "(an earlier image: not repeated)"}
    assert resolved[1]["content"][2] == {"type": "text", "text": "(an earlier image: not repeated)"}
    assert all(block["type"] != FETCH for m in resolved for block in m["content"])
    # With nothing newer, the URL stays for the API to fetch.
    assert resolve(messages[:1], source)[0]["content"][2]["source"]["type"] == "url"


class _Echo:
    """A model port that records the messages it was handed."""

    def __init__(self) -> None:
        self.provider = "echo"
        self.seen: list[Sequence[Mapping[str, Any]]] = []

    def stream(self, request: ModelRequest) -> Generator[ModelStreamEvent, None, None]:
        self.seen.append(request.messages)
        yield from ()


def test_a_history_is_looked_through_for_files_once_not_on_every_model_call() -> None:
    """The engine's file counts outlive a turn: a request that repeats the last one's
    history (the same content lists, in new dicts) counts files in its new messages only,
    and a file anywhere in the history is still resolved."""
    files = file_counts()
    source = Source({"AgAC": b"jpeg"})
    history: list[dict[str, Any]] = [
        {"role": role, "content": [{"type": "text", "text": f"{role} {n}"}]}
        for n in range(40)
        for role in ("user", "assistant")
    ]
    for turn in range(3):
        asked = [{"role": "user", "content": [{"type": "text", "text": f"question {turn}"}]}]
        request = ModelRequest(model="m", system="", messages=(*(dict(m) for m in history), *asked))
        inner = _Echo()
        list(WithAttachments(inner, source, files=files).stream(request))
        assert inner.seen == [request.messages]  # no files: handed over as they are
        history += asked
    assert files.measured == 81 + 1 + 1
    with_photo = {"role": "user", "content": _blocks("telegram", "look", PHOTO)}
    request = ModelRequest(model="m", system="", messages=(*(dict(m) for m in history), with_photo))
    inner = _Echo()
    list(WithAttachments(inner, source, files=files).stream(request))
    [handed] = inner.seen
    assert handed[-1]["content"][2]["source"]["type"] == "base64"
    later = ModelRequest(
        model="m",
        system="",
        messages=(*(dict(m) for m in request.messages), {"role": "assistant", "content": []}),
    )
    inner = _Echo()
    list(WithAttachments(inner, source, files=files).stream(later))
    assert inner.seen[0][-2]["content"][2]["source"]["type"] == "base64"
    assert files.measured == 83 + 1 + 1
