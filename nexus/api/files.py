"""`POST /v1/inbound/files`: a file as an event, from a caller with a bearer token.

The one inbound route that takes a bearer token rather than a platform's signature (the
request guard checks it before the body is read, and refuses a body over the limit with
413). The upload goes into the ledger the way the watched folder's files do
(nexus.ingest.files).
"""

from __future__ import annotations

import json
import mimetypes
from typing import Any

from fastapi import Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from nexus.api.body import read_limited
from nexus.api.deps import CallerDep, NexusDep, v1_router
from nexus.api.errors import ApiError
from nexus.api.multipart import NotMultipart, Part, form_parts
from nexus.bootstrap import Nexus
from nexus.ingest.files import FileArrival, record_files, upload_arrival

router = v1_router("/v1/inbound", "inbound")

PATH = "/v1/inbound/files"
# Form fields other than the file, and the longest each may be.
_FIELDS = {"text": 100_000, "session": 200, "metadata": 20_000, "id": 200}


class FileAccepted(BaseModel):
    """202 when stored now; 200 when this upload was stored before (a retry)."""

    event_id: str
    duplicate: bool
    routable: bool


def _field(parts: dict[str, Part], name: str) -> str | None:
    part = parts.get(name)
    if part is None:
        return None
    try:
        value = part.data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ApiError(400, "malformed_request", f"the field {name!r} is not UTF-8") from error
    if len(value) > _FIELDS[name]:
        raise ApiError(422, "invalid_request", f"{name!r} is over {_FIELDS[name]} characters")
    if "\x00" in value:
        raise ApiError(400, "malformed_request", f"the field {name!r} contains NUL")
    return value.strip() or None


def _metadata(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError as error:
        raise ApiError(422, "invalid_request", "'metadata' is not JSON") from error
    if not isinstance(parsed, dict):
        raise ApiError(422, "invalid_request", "'metadata' must be a JSON object")
    return parsed


def _mime(part: Part, name: str) -> str | None:
    declared = (part.content_type or "").split(";", 1)[0].strip().lower()
    if declared and declared != "application/octet-stream":
        return declared
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or declared or None


def _arrival(request: Request, body: bytes, caller_ns: str, graph: Nexus) -> FileArrival:
    try:
        parts = {
            part.name: part for part in form_parts(request.headers.get("content-type", ""), body)
        }
    except NotMultipart as error:
        raise ApiError(400, "malformed_request", str(error)) from error
    upload = parts.get("file")
    if upload is None:
        raise ApiError(422, "invalid_request", "send the file in a form field named 'file'")
    # The name only: a client's path says nothing Nexus should keep.
    name = (upload.filename or "upload").replace("\\", "/").rsplit("/", 1)[-1] or "upload"
    return upload_arrival(
        namespace=caller_ns,
        name=name,
        mime_type=_mime(upload, name),
        data=upload.data,
        label=_field(parts, "session"),
        text=_field(parts, "text"),
        metadata=_metadata(_field(parts, "metadata")),
        key=_field(parts, "id"),
        occurred_at=graph.clock(),
        max_bytes=graph.settings.attachment_max_bytes,
    )


@router.post(
    "/files",
    status_code=202,
    responses={200: {"model": FileAccepted}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "text": {"type": "string"},
                            "session": {"type": "string"},
                            "metadata": {"type": "string", "description": "a JSON object"},
                            "id": {"type": "string", "description": "idempotency key"},
                        },
                    }
                }
            },
        }
    },
)
async def upload_file(
    request: Request, caller: CallerDep, graph: NexusDep, response: Response
) -> FileAccepted:
    """A file (multipart `file`, with optional `text`, `session` label, `metadata` JSON
    object and `id` idempotency key) as one event. Images, PDFs and UTF-8 text become an
    attachment the model reads; any other file is recorded as a note in the text."""
    body = await read_limited(request, graph.settings.max_body_bytes)
    arrival = _arrival(request, body, caller.namespace, graph)

    def store() -> tuple[bool, bool]:
        with graph.database.unit_of_work() as uow:
            [result] = record_files(uow, [arrival], graph.doorbell)
            uow.commit()
        return result.stored, result.routable

    stored, routable = await run_in_threadpool(store)
    response.status_code = 202 if stored else 200
    return FileAccepted(event_id=arrival.event_id, duplicate=not stored, routable=routable)
