"""What a worker and its hook processes say to each other: JSON messages, size-limited.

JSON and not pickle in both directions: unpickling what a hook process sends could run
code of the hook's choosing in the worker, which the process boundary is there to prevent.
"""

from __future__ import annotations

import json
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from nexus.hooks.spec import HookInfo, HookResult

# Larger answers are refused (the hook process is then replaced): a hook cannot make the
# worker buffer without bound.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
RESULTS: TypeAdapter[HookResult] = TypeAdapter(HookResult)
STATES: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
INFOS: TypeAdapter[HookInfo] = TypeAdapter(HookInfo)
T = TypeVar("T")


class ProtocolError(Exception):
    """A hook process sent something that is not a message of this protocol."""


def send(connection: Connection, message: dict[str, Any]) -> None:
    connection.send_bytes(json.dumps(message, separators=(",", ":")).encode())


def receive(connection: Connection) -> dict[str, Any]:
    """The next message; EOFError when the other side is gone, ProtocolError for nonsense
    (a message over MAX_MESSAGE_BYTES included: the connection is unusable after it)."""
    try:
        data = connection.recv_bytes(MAX_MESSAGE_BYTES)
    except OSError as error:
        raise ProtocolError(f"unreadable message: {error}") from error
    try:
        message = json.loads(data)
    except ValueError as error:
        raise ProtocolError(f"not JSON: {error}") from error
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("not a message")
    return message


def result_as_json(result: HookResult) -> dict[str, Any]:
    """A hook's result for the wire; TypeError when it holds what JSON cannot (its
    `extracted` values end up in a JSON column anyway)."""
    try:
        encoded: dict[str, Any] = RESULTS.dump_python(result, mode="json", warnings=False)
        json.dumps(encoded)
    except Exception as error:
        raise TypeError(f"the result is not JSON: {error}") from error
    return encoded


def _validated(adapter: TypeAdapter[T], value: Any, what: str) -> T:
    """`value` as `adapter`'s type, or a ProtocolError saying it is not `what`."""
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        raise ProtocolError(f"{what}: {error}") from error


def result_from_json(value: Any) -> HookResult:
    return _validated(RESULTS, value, "not a HookResult")


def state_from_json(value: Any) -> dict[str, Any]:
    return _validated(STATES, value, "the state is not an object")


def info_as_json(info: HookInfo) -> dict[str, Any]:
    encoded: dict[str, Any] = INFOS.dump_python(info, mode="json")
    return encoded


def info_from_json(value: Any) -> HookInfo:
    return _validated(INFOS, value, "not a HookInfo")
