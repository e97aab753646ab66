"""The latency floor: Nexus's deployed hops written bare, to see what the path itself costs.

HTTP POST (uvicorn + Starlette) → one transaction storing the event → a router flag (SET NX)
and `send_task` → one Celery task: a lease (SET NX PX), one transaction routing and claiming
the event (SELECT … FOR UPDATE SKIP LOCKED, INSERT queue item + UPDATE event, UPDATE epoch +
claim), a context read, one transaction committing the turn in one statement (turn, two
messages, pointer, queue item consumed), then XADD `turn.committed`. No identity, policy,
model, hooks, stream deltas or deliveries: the statements and hops a message cannot do
without, on the same servers and Celery settings as Nexus.

Run as processes: `uvicorn bench.floor_app:api` and `celery -A bench.floor_app worker`.
"""

from __future__ import annotations

import hmac
import json
import uuid

from celery import Celery
from sqlalchemy import create_engine, text
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.bare_app import create_bare, engine, redis_client
from nexus.ids import new_id, now_ms
from nexus.settings import Settings

settings = Settings()
app: Celery = create_bare(settings)
app.conf.task_routes = {**app.conf.task_routes, "floor.route": {"queue": "events"}}

SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_sessions (
    id text PRIMARY KEY, sender text UNIQUE NOT NULL, head text, epoch bigint NOT NULL);
CREATE TABLE IF NOT EXISTS floor_events (
    id text PRIMARY KEY, sender text NOT NULL, body jsonb NOT NULL, status text NOT NULL,
    at bigint NOT NULL);
CREATE INDEX IF NOT EXISTS floor_events_waiting ON floor_events (at) WHERE status = 'received';
CREATE TABLE IF NOT EXISTS floor_queue (
    id text PRIMARY KEY, session_id text NOT NULL REFERENCES floor_sessions,
    event_id text NOT NULL UNIQUE REFERENCES floor_events, status text NOT NULL,
    epoch bigint);
CREATE TABLE IF NOT EXISTS floor_turns (
    id text PRIMARY KEY, session_id text NOT NULL REFERENCES floor_sessions,
    parent text REFERENCES floor_turns, epoch bigint NOT NULL, at bigint NOT NULL,
    UNIQUE (session_id, parent));
CREATE TABLE IF NOT EXISTS floor_messages (
    id text PRIMARY KEY, turn_id text NOT NULL REFERENCES floor_turns, seq int NOT NULL,
    role text NOT NULL, content jsonb NOT NULL);
"""

_STORE = text(
    "INSERT INTO floor_events (id, sender, body, status, at) "
    "VALUES (:id, :sender, CAST(:body AS jsonb), 'received', :at) ON CONFLICT DO NOTHING"
)
_WAITING = text(
    "SELECT e.id, e.body ->> 'text' AS said, s.id AS sid FROM floor_events e "
    "JOIN floor_sessions s ON s.sender = e.sender WHERE e.status = 'received' "
    "ORDER BY e.at LIMIT 20 FOR UPDATE OF e SKIP LOCKED"
)
_QUEUE = text(
    "WITH item AS (INSERT INTO floor_queue (id, session_id, event_id, status) "
    "VALUES (:qid, :sid, :eid, 'queued')) "
    "UPDATE floor_events SET status = 'routed' WHERE id = :eid"
)
_CLAIM = text(
    "WITH s AS (UPDATE floor_sessions SET epoch = epoch + 1 WHERE id = :sid "
    "RETURNING epoch, head) "
    "UPDATE floor_queue q SET status = 'claimed', epoch = s.epoch FROM s "
    "WHERE q.id = :qid RETURNING s.epoch, s.head"
)
_CONTEXT = text(
    "SELECT m.role, m.content FROM floor_messages m JOIN floor_turns t ON t.id = m.turn_id "
    "WHERE t.session_id = :sid ORDER BY t.at DESC, m.seq LIMIT 40"
)
_COMMIT = text(
    "WITH s AS (UPDATE floor_sessions SET head = :tid WHERE id = :sid AND epoch = :epoch "
    "AND head IS NOT DISTINCT FROM :parent RETURNING id), "
    "t AS (INSERT INTO floor_turns (id, session_id, parent, epoch, at) "
    "SELECT :tid, id, :parent, :epoch, :at FROM s RETURNING id), "
    "m AS (INSERT INTO floor_messages (id, turn_id, seq, role, content) "
    "SELECT :m1, id, 0, 'user', CAST(:q AS jsonb) FROM t UNION ALL "
    "SELECT :m2, id, 1, 'assistant', CAST(:a AS jsonb) FROM t) "
    "UPDATE floor_queue SET status = 'consumed' WHERE id = :qid AND epoch = :epoch "
    "AND EXISTS (SELECT 1 FROM t) RETURNING id"
)


def _key(name: str) -> str:
    return f"{settings.broker_prefix or ''}floor:{name}"


def prepare(url: str, senders: int) -> list[str]:
    """The floor's tables and one session per sender (as `harness.telegram_update` numbers
    them), in the benchmark's database; the sessions' ids, by sender."""
    sessions = [f"s{sender}" for sender in range(senders)]
    admin = create_engine(url)
    with admin.begin() as connection:
        connection.exec_driver_sql(SCHEMA)
        for sender, session_id in enumerate(sessions):
            connection.execute(
                text("INSERT INTO floor_sessions VALUES (:id, :sender, NULL, 0)"),
                {"id": session_id, "sender": str(7000 + sender)},
            )
    admin.dispose()
    return sessions


def _store(event_id: str, sender: str, body: bytes) -> None:
    with engine().begin() as connection:
        connection.execute(
            _STORE, {"id": event_id, "sender": sender, "body": body.decode(), "at": now_ms()}
        )


def stream_key(prefix: str, session_id: str) -> str:
    """Where the floor announces a commit in the session (`turn.committed`)."""
    return f"{prefix}floor:stream:{session_id}"


async def _hook(request: Request) -> Response:
    secret = settings.telegram_secret_token
    given = request.headers.get("x-telegram-bot-api-secret-token", "")
    if secret is None or not hmac.compare_digest(given, secret.get_secret_value()):
        return JSONResponse({"error": "unauthorized"}, status_code=401)
    body = await request.body()
    update = json.loads(body)
    event_id = f"telegram:{update['update_id']}"
    sender = str(update["message"]["from"]["id"])
    await run_in_threadpool(_store, event_id, sender, json.dumps(update["message"]).encode())
    if redis_client().set(_key("router"), "1", nx=True, ex=300):
        app.send_task("floor.route", args=[event_id])
    return JSONResponse({"accepted": [{"event_id": event_id}]})


api = Starlette(routes=[Route("/hook", _hook, methods=["POST"])])


@app.task(name="floor.route")
def route(event_id: str) -> int:
    client = redis_client()
    client.delete(_key("router"))
    database = engine()
    leased = False
    with database.begin() as connection:
        waiting = connection.execute(_WAITING).all()
        for row in waiting:
            qid = new_id()
            connection.execute(_QUEUE, {"qid": qid, "sid": row.sid, "eid": row.id})
        if not waiting:
            return 0
        last = waiting[-1]
        leased = bool(client.set(_key(f"lease:{last.sid}"), uuid.uuid4().hex, nx=True, px=30_000))
        if leased:
            epoch, head = connection.execute(_CLAIM, {"sid": last.sid, "qid": qid}).one()
    if not leased:
        return len(waiting)
    with database.connect() as connection:
        context = connection.execute(_CONTEXT, {"sid": last.sid}).all()
        connection.rollback()
    answer = f"you said: {last.said} ({len(context)} before)"
    turn_id = new_id()
    with database.begin() as connection:
        connection.execute(
            _COMMIT,
            {
                "tid": turn_id,
                "sid": last.sid,
                "epoch": epoch,
                "parent": head,
                "at": now_ms(),
                "m1": new_id(),
                "m2": new_id(),
                "q": json.dumps({"text": last.said}),
                "a": json.dumps({"text": answer}),
                "qid": qid,
            },
        ).one()
    stream = stream_key(settings.broker_prefix or "", last.sid)
    client.xadd(stream, {"type": "turn.committed", "turn_id": turn_id})
    client.delete(_key(f"lease:{last.sid}"))
    return len(waiting)
