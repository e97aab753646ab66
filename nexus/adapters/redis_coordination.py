"""Coordination over Redis: SET NX leases with a token, a flag key, a list inbox, streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import LockError

from nexus.engine.query import QueryMessage
from nexus.engine.stream_events import StreamEvent
from nexus.ledger.enums import MessageSource
from nexus.queueing.coordination import CoordinationUnavailable, Steer
from nexus.queueing.running import RUNNING_TTL_S, RunningTurn, change_for, running_from
from nexus.queueing.stream_expiry import STREAM_REPLAY_WINDOW_S, stream_expiries
from nexus.queueing.stream_log import START, STREAM_KEEP, StreamEntry

SIGNAL_TTL_S = 3_600  # a signal nobody took is stale after an hour; its input is durable
# Every command's socket timeout (redis-py's default, said out loud; a URL may set its own).
# A blocking XREAD is cut into slices shorter than it, or the socket would time out under it.
SOCKET_TIMEOUT_S = 5.0
# Each open SSE stream blocks on a connection of its own while it waits; redis-py's async pool
# stops at 100 and then fails, so the streams' pool is sized for thousands.
STREAM_CONNECTIONS = 10_000
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)

_KEEP_HIGHEST = """
local current = tonumber(redis.call('GET', KEYS[1]))
if current == nil or current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return 1
"""
# EXPIRE unless the key has longer to live already (EXPIRE's GT option, which Redis has only
# from 7.0, would also leave a key without an expiry as it is).
_EXPIRE_AT_LEAST = """
local ttl = redis.call('TTL', KEYS[1])
if ttl >= tonumber(ARGV[1]) then
  return 0
end
return redis.call('EXPIRE', KEYS[1], ARGV[1])
"""

StreamClient = Callable[[], "redis.asyncio.Redis"]


class _Posted(threading.local):
    """What this thread posted and has not read the answers to: the connection the commands
    went out on (kept from the pool until then) and how many answers are owed."""

    connection: Any = None
    answers: int = 0


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
    """`streams` makes the async client the SSE route reads with, one per event loop (an
    asyncio connection belongs to the loop that opened it)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        streams: StreamClient,
        prefix: str = "nexus:",
        replay_window_s: int = STREAM_REPLAY_WINDOW_S,
    ) -> None:
        self._redis = client
        self._prefix = prefix
        self._replay_window_s = replay_window_s
        self._new_stream_client = streams
        self._stream_clients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}
        self._clients_lock = threading.Lock()
        self._posted = _Posted()
        # SET unless a higher epoch is there already: two askers racing never lower it.
        # Registering computes the script's digest; nothing is sent until it is called.
        self._keep_highest = client.register_script(_KEEP_HIGHEST)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "nexus:") -> RedisCoordination:
        def streams() -> redis.asyncio.Redis:
            return redis.asyncio.Redis.from_url(
                url, socket_timeout=SOCKET_TIMEOUT_S, max_connections=STREAM_CONNECTIONS
            )

        client = redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S)
        return cls(client, streams=streams, prefix=prefix)

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def acquire(self, name: str, ttl_ms: int) -> RedisLease | None:
        self._settle()
        # thread_local=False: the keep-alive thread extends a lock another thread took.
        lock = self._redis.lock(self._key("lease", name), timeout=ttl_ms / 1000, thread_local=False)
        if not lock.acquire(blocking=False):
            return None
        return RedisLease(lock, ttl_ms / 1000)

    def lease_held(self, name: str) -> bool:
        self._settle()
        return bool(self._redis.exists(self._key("lease", name)))

    def raise_flag(self, name: str, ttl_ms: int) -> bool:
        self._settle()
        return bool(self._redis.set(self._key("flag", name), 1, nx=True, px=ttl_ms))

    def lower_flag(self, name: str) -> None:
        self._settle()
        self._redis.delete(self._key("flag", name))

    def request_abort(self, session_id: str, *, epoch: int) -> None:
        self._settle()
        self._keep_highest(keys=[self._key("abort", session_id)], args=[epoch, SIGNAL_TTL_S])

    def abort_epoch(self, session_id: str) -> int | None:
        self._settle()
        raised = self._redis.get(self._key("abort", session_id))
        return None if raised is None else int(raised)

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None:
        self._settle()
        key = self._key("steer", session_id)
        pipe = self._redis.pipeline()
        pipe.rpush(key, json.dumps({"epoch": epoch, "message": asdict(message)}))
        pipe.expire(key, SIGNAL_TTL_S)
        pipe.execute()

    def take_steering(self, session_id: str) -> list[Steer]:
        self._settle()
        key = self._key("steer", session_id)
        pipe = self._redis.pipeline()  # MULTI: read and clear as one step
        pipe.lrange(key, 0, -1)
        pipe.delete(key)
        raw, _ = pipe.execute()
        return [_steer(json.loads(item)) for item in raw]

    def steers_waiting(self, session_id: str) -> list[Steer]:
        self._settle()
        return [
            _steer(json.loads(item))
            for item in self._redis.lrange(self._key("steer", session_id), 0, -1)
        ]

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        # A Redis stream, not pub/sub: entries have ids and stay a while, so an SSE client
        # that reconnects (to any API process) replays what it missed. One pipeline, one
        # round trip, however many events (and sessions) it carries.
        self.post_many(events)
        self._settle()

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        if not events:
            return
        pipe = self._redis.pipeline(transaction=False)
        self._add_events(pipe, events)
        self._post(pipe)

    def settle(self) -> None:
        self._settle()

    def _post(self, pipe: Any) -> None:
        """Send the pipeline's commands and go on: their answers are read by the next call
        this thread makes (`_settle`), so a running turn does not wait a round trip for each
        of its publishes. Commands that follow on this thread's posting connection are
        answered after them, in order."""
        posted = self._posted
        connection = posted.connection
        if connection is None:
            connection = self._redis.connection_pool.get_connection()
        commands = [args for args, _options in pipe.command_stack]
        try:
            connection.send_packed_command(connection.pack_commands(commands))
        except BaseException:
            posted.connection, posted.answers = None, 0
            connection.disconnect()
            self._redis.connection_pool.release(connection)
            raise
        posted.connection, posted.answers = connection, posted.answers + len(commands)

    def _settle(self) -> None:
        """Read the answers owed for what this thread posted, and give the connection back:
        once this returns, Redis has applied it all. An error answer is raised here."""
        posted = self._posted
        connection, owed = posted.connection, posted.answers
        if connection is None:
            return
        posted.connection, posted.answers = None, 0
        failed: BaseException | None = None
        try:
            for _ in range(owed):
                try:
                    connection.read_response()
                except redis.ResponseError as error:  # the rest are still owed: read on
                    failed = failed or error
        except BaseException:
            connection.disconnect()  # answers lost midway: the connection is unusable
            raise
        finally:
            self._redis.connection_pool.release(connection)
        if failed is not None:
            raise failed

    def _add_events(self, pipe: Any, events: Sequence[StreamEvent]) -> None:
        for event in events:
            key = self._key("stream", event.session_id)
            fields = {"type": event.type, "data": json.dumps(event.data, default=str)}
            if event.at:  # where the ledger keeps it: a reconnect after a flush reads there
                fields["at"] = event.at
            pipe.xadd(key, fields, maxlen=STREAM_KEEP, approximate=True)
            self._follow(pipe, event)
        # One command per stream, as ever: the hour while a turn runs, the replay window once
        # its commit has reported (nexus/queueing/stream_expiry.py).
        expiries = stream_expiries(events, window_s=self._replay_window_s)
        for session_id, expiry in expiries.items():
            key = self._key("stream", session_id)
            if expiry.at_least:
                pipe.eval(_EXPIRE_AT_LEAST, 1, key, expiry.seconds)
            else:
                pipe.expire(key, expiry.seconds)

    def _follow(self, pipe: Any, event: StreamEvent) -> None:
        """The running-turn record, kept in the same round trip as the events it follows."""
        change = change_for(event)
        if change is None:
            return
        key = self._key("running", event.session_id)
        if change.kind != "set":
            pipe.delete(key)
        if change.kind != "end":
            pipe.hset(key, mapping=change.fields)
            pipe.expire(key, RUNNING_TTL_S)

    def running(self, session_id: str) -> RunningTurn | None:
        self._settle()
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._key("running", session_id))
        pipe.exists(self._key("lease", f"session:{session_id}"))
        fields, held = pipe.execute()
        if not held:
            return None
        return running_from({_text(k): _text(v) for k, v in fields.items()})

    def stream_tail(self, session_id: str) -> str:
        self._settle()
        newest: Any = self._redis.xrevrange(self._key("stream", session_id), count=1)
        return _text(newest[0][0]) if newest else START

    def read_stream(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        self._settle()
        key = self._key("stream", session_id)
        deadline = time.monotonic() + block_ms / 1000
        most = _slice_ms(self._redis)
        while True:  # in slices: one XREAD blocking past the socket timeout would fail
            wait = min(most, max(int((deadline - time.monotonic()) * 1000), 1))
            entries = _entries(self._redis.xread({key: after}, block=wait))
            if entries or time.monotonic() >= deadline:
                return entries

    async def stream_tail_async(self, session_id: str) -> str:
        client = self._stream_client()
        try:
            newest: Any = await client.xrevrange(self._key("stream", session_id), count=1)
        except _UNREACHABLE as error:
            raise CoordinationUnavailable(f"Redis: {type(error).__name__}") from error
        return _text(newest[0][0]) if newest else START

    async def read_stream_async(
        self, session_id: str, after: str, *, block_ms: int
    ) -> list[StreamEntry]:
        client = self._stream_client()
        key = self._key("stream", session_id)
        deadline = time.monotonic() + block_ms / 1000
        most = _slice_ms(client)
        while True:
            wait = min(most, max(int((deadline - time.monotonic()) * 1000), 1))
            try:
                entries = _entries(await client.xread({key: after}, block=wait))
            except _UNREACHABLE as error:
                raise CoordinationUnavailable(f"Redis: {type(error).__name__}") from error
            if entries or time.monotonic() >= deadline:
                return entries

    async def stream_holds_async(self, session_id: str, stream_id: str) -> bool:
        client = self._stream_client()
        key = self._key("stream", session_id)
        try:
            found: Any = await client.xrange(key, min=stream_id, max=stream_id, count=1)
        except _UNREACHABLE as error:
            raise CoordinationUnavailable(f"Redis: {type(error).__name__}") from error
        return bool(found)

    def _stream_client(self) -> redis.asyncio.Redis:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            client = self._stream_clients.get(loop)
            if client is None:
                # A loop that closed (a test's, say) leaves its client behind: drop those.
                for done in [known for known in self._stream_clients if known.is_closed()]:
                    del self._stream_clients[done]
                client = self._stream_clients[loop] = self._new_stream_client()
            return client


def _slice_ms(client: redis.Redis | redis.asyncio.Redis) -> int:
    """The longest one blocking read may wait on this client: well inside its socket timeout."""
    timeout = client.connection_pool.connection_kwargs.get("socket_timeout", SOCKET_TIMEOUT_S)
    if timeout is None:
        return 60_000
    # A second's margin for the reply to arrive on a busy machine, at most half the timeout.
    seconds = max(min(float(timeout) - 1.0, float(timeout) * 0.8), float(timeout) / 2)
    return max(int(seconds * 1000), 1)


def _entries(found: Any) -> list[StreamEntry]:
    entries: list[StreamEntry] = []
    for _key, items in found or []:
        for entry_id, fields in items:
            decoded = {_text(k): _text(v) for k, v in fields.items()}
            entries.append(
                StreamEntry(
                    _text(entry_id),
                    decoded["type"],
                    json.loads(decoded["data"]),
                    decoded.get("at", ""),
                )
            )
    return entries


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _steer(stored: dict[str, Any]) -> Steer:
    return Steer(epoch=int(stored["epoch"]), message=_query(stored["message"]))


def _query(fields: dict[str, Any]) -> QueryMessage:
    fields["source"] = MessageSource(fields.get("source") or MessageSource.HUMAN)
    fields["attachments"] = tuple(fields.get("attachments") or ())  # JSON gave a list
    return QueryMessage(**fields)
