"""A multipart/form-data body into its parts, with the standard library's MIME parser."""

from __future__ import annotations

from dataclasses import dataclass
from email import policy
from email.parser import BytesParser


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    content_type: str | None  # as the client declared it, if it did
    data: bytes


class NotMultipart(ValueError):
    """The body is not a multipart/form-data body (the message says why)."""


def form_parts(content_type: str, body: bytes) -> list[Part]:
    """The named parts of a multipart/form-data body (a part without a name is skipped)."""
    if content_type.split(";", 1)[0].strip().lower() != "multipart/form-data":
        raise NotMultipart("send the file as multipart/form-data")
    header = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=policy.HTTP).parsebytes(header + body)
    if not message.is_multipart() or message.defects:
        raise NotMultipart("the multipart body is malformed (no boundary, or no parts)")
    parts: list[Part] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        payload = part.get_payload(decode=True)
        declared = part.get("content-type")
        parts.append(
            Part(
                name=name,
                filename=part.get_filename(),
                content_type=str(declared) if declared is not None else None,
                data=payload if isinstance(payload, bytes) else b"",
            )
        )
    return parts
