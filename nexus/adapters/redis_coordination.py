"""Coordination over Redis: SET NX leases with a token, a flag key, a list inbox, pub/sub."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import redis
from redis.exceptions import LockError

from nexus.engine.query import QueryMessage
from nexus.engine.stream import StreamEvent
from nexus.ledger.enums import MessageSource
from nexus.queueing.stream_log import START, STREAM_KEEP, STREAM_TTL_S, StreamEntry

SIGNAL_TTL_S = 3_600  # a signal nobody took is stale after an hour; its input is durable


class RedisLease:
    def __init__(self, lock: Any, ttl_s: float) -> None:
        self._lock = lock
        self._ttl_s = ttl_s

    def extend(self) -> bool:
        try:
            return bool(self._lock.extend(self._ttl_s, replace_ttl=True))
        except LockError:
            return False  # expired, or someone else's now

    def release(self) -> None:
        with contextlib.suppress(LockError):  # it expired: nothing of ours to release
            self._lock.release()


class RedisCoordination:
    def __init__(self, client: redis.Redis, *, prefix: str = "nexus:") -> None:
        self._redis = client
        self._prefix = prefix

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "nexus:") -> RedisCoordination:
        return cls(redis.Redis.from_url(url), prefix=prefix)

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def acquire(self, name: str, ttl_ms: int) -> RedisLease | None:
        # thread_local=False: the keep-alive thread extends a lock another thread took.
        lock = self._redis.lock(self._key("lease", name), timeout=ttl_ms / 1000, thread_local=False)
        if not lock.acquire(blocking=False):
            return None
        return RedisLease(lock, ttl_ms / 1000)

    def lease_held(self, name: str) -> bool:
        return bool(self._redis.exists(self._key("lease", name)))

    def raise_flag(self, name: str, ttl_ms: int) -> bool:
        return bool(self._redis.set(self._key("flag", name), 1, nx=True, px=ttl_ms))

    def lower_flag(self, name: str) -> None:
        self._redis.delete(self._key("flag", name))

    def request_abort(self, session_id: str) -> None:
        self._redis.set(self._key("abort", session_id), 1, ex=SIGNAL_TTL_S)

    def clear_abort(self, session_id: str) -> None:
        self._redis.delete(self._key("abort", session_id))

    def abort_requested(self, session_id: str) -> bool:
        return bool(self._redis.exists(self._key("abort", session_id)))

    def steer(self, session_id: str, message: QueryMessage) -> None:
        key = self._key("steer", session_id)
        pipe = self._redis.pipeline()
        pipe.rpush(key, json.dumps(asdict(message)))
        pipe.expire(key, SIGNAL_TTL_S)
        pipe.execute()

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        key = self._key("steer", session_id)
        pipe = self._redis.pipeline()  # MULTI: read and clear as one step
        pipe.lrange(key, 0, -1)
        pipe.delete(key)
        raw, _ = pipe.execute()
        return [_query(json.loads(item)) for item in raw]

    def steer_waiting(self, session_id: str) -> bool:
        waiting = self._redis.lrange(self._key("steer", session_id), 0, -1)
        return any(json.loads(item).get("extends_answer") for item in waiting)

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        # A Redis stream, not pub/sub: entries have ids and stay a while, so an SSE client
        # that reconnects (to any API process) replays what it missed. One pipeline, one
        # round trip, however many events (and sessions) it carries.
        if not events:
            return
        pipe = self._redis.pipeline(transaction=False)
        keys: dict[str, None] = {}
        for session_id, event_type, data in events:
            key = self._key("stream", session_id)
            keys[key] = None
            fields = {"type": event_type, "data": json.dumps(data, default=str)}
            pipe.xadd(key, fields, maxlen=STREAM_KEEP, approximate=True)  # type: ignore[arg-type]
        for key in keys:
            pipe.expire(key, STREAM_TTL_S)
        pipe.execute()

    def stream_tail(self, session_id: str) -> str:
        newest: Any = self._redis.xrevrange(self._key("stream", session_id), count=1)
        return _text(newest[0][0]) if newest else START

    def read_stream(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        key = self._key("stream", session_id)
        found: Any = self._redis.xread({key: after}, block=max(block_ms, 1))
        entries: list[StreamEntry] = []
        for _key, items in found or []:
            for entry_id, fields in items:
                decoded = {_text(k): _text(v) for k, v in fields.items()}
                entries.append(
                    StreamEntry(_text(entry_id), decoded["type"], json.loads(decoded["data"]))
                )
        return entries


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _query(fields: dict[str, Any]) -> QueryMessage:
    fields["source"] = MessageSource(fields.get("source") or MessageSource.HUMAN)
    return QueryMessage(**fields)
