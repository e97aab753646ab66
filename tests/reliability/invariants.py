"""The invariants (docs/architecture.md), checked from the ledger after every scenario."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from sqlalchemy import Connection, text

from nexus.db import Database
from nexus.ledger.enums import CHAIN_STATUSES, Disposition, QueueStatus

CHAIN = {status.value for status in CHAIN_STATUSES}
OPEN = {QueueStatus.QUEUED.value, QueueStatus.CLAIMED.value}
# Which dispositions each final status may carry (docs/ledger.md, "The queue").
FINAL: dict[str, set[str]] = {
    QueueStatus.DONE: {Disposition.CONSUMED, Disposition.BATCHED, Disposition.INJECTED},
    QueueStatus.DROPPED: {Disposition.DROPPED, Disposition.CANCELLED, Disposition.DENIED},
    QueueStatus.DEAD: {Disposition.DEAD_LETTERED},
}
# Rows of these tables are never deleted (invariant 5; sessions archive by status).
APPEND_ONLY = (
    "events",
    "sessions",
    "session_history",
    "turns",
    "threads",
    "messages",
    "tool_calls",
    "compactions",
    "queue_items",
    "hook_invocations",
    "deliveries",
)
AUDIT = "reliability_audit"

# Postgres keeps its own record of what should never happen: a row-level trigger notes every
# deleted row, a statement-level one every TRUNCATE, and one on sessions every epoch that
# went down. The record survives whatever the scenario's processes do in between.
_GUARDS = [
    f"CREATE TABLE IF NOT EXISTS {AUDIT} (id BIGSERIAL PRIMARY KEY, tbl TEXT NOT NULL, "
    "what TEXT NOT NULL, detail TEXT)",
    f"""CREATE OR REPLACE FUNCTION reliability_note_delete() RETURNS trigger AS $$
BEGIN
  INSERT INTO {AUDIT} (tbl, what, detail) VALUES (TG_TABLE_NAME, TG_OP,
    CASE WHEN TG_LEVEL = 'ROW' THEN row_to_json(OLD)::text END);
  RETURN NULL;
END $$ LANGUAGE plpgsql""",
    f"""CREATE OR REPLACE FUNCTION reliability_note_epoch() RETURNS trigger AS $$
BEGIN
  IF NEW.epoch < OLD.epoch THEN
    INSERT INTO {AUDIT} (tbl, what, detail)
      VALUES ('sessions', 'EPOCH DOWN', NEW.id || ': ' || OLD.epoch || ' -> ' || NEW.epoch);
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql""",
]


def _guard_statements(table: str) -> list[str]:
    return [
        f'DROP TRIGGER IF EXISTS reliability_rows_{table} ON "{table}"',
        f'CREATE TRIGGER reliability_rows_{table} AFTER DELETE ON "{table}" '
        "FOR EACH ROW EXECUTE FUNCTION reliability_note_delete()",
        f'DROP TRIGGER IF EXISTS reliability_truncate_{table} ON "{table}"',
        f'CREATE TRIGGER reliability_truncate_{table} AFTER TRUNCATE ON "{table}" '
        "FOR EACH STATEMENT EXECUTE FUNCTION reliability_note_delete()",
    ]


@dataclass(frozen=True)
class Baseline:
    """What the ledger held when the scenario began."""

    counts: dict[str, int]
    audit_id: int | None  # the last audit row before the scenario (Postgres only)


def install_guards(connection: Connection) -> None:
    """Add the audit triggers (idempotent); Postgres only: SQLite is checked by counts."""
    if connection.dialect.name != "postgresql":
        return
    for statement in _GUARDS:
        connection.exec_driver_sql(statement)
    for table in APPEND_ONLY:
        for statement in _guard_statements(table):
            connection.exec_driver_sql(statement)
    connection.exec_driver_sql("DROP TRIGGER IF EXISTS reliability_epoch ON sessions")
    connection.exec_driver_sql(
        "CREATE TRIGGER reliability_epoch BEFORE UPDATE OF epoch ON sessions "
        "FOR EACH ROW EXECUTE FUNCTION reliability_note_epoch()"
    )


def remove_guards(connection: Connection) -> None:
    if connection.dialect.name != "postgresql":
        return
    for table in APPEND_ONLY:
        connection.exec_driver_sql(f'DROP TRIGGER IF EXISTS reliability_rows_{table} ON "{table}"')
        connection.exec_driver_sql(
            f'DROP TRIGGER IF EXISTS reliability_truncate_{table} ON "{table}"'
        )
    connection.exec_driver_sql("DROP TRIGGER IF EXISTS reliability_epoch ON sessions")
    # Leave the shared test database as the migrations made it (the schema test compares).
    connection.exec_driver_sql(f"DROP TABLE IF EXISTS {AUDIT}")
    connection.exec_driver_sql("DROP FUNCTION IF EXISTS reliability_note_delete()")
    connection.exec_driver_sql("DROP FUNCTION IF EXISTS reliability_note_epoch()")


def take_baseline(connection: Connection) -> Baseline:
    counts = {
        table: int(connection.exec_driver_sql(f'SELECT count(*) FROM "{table}"').scalar_one())
        for table in APPEND_ONLY
    }
    audit_id = None
    if connection.dialect.name == "postgresql" and _has_audit(connection):
        audit_id = int(
            connection.exec_driver_sql(f"SELECT coalesce(max(id), 0) FROM {AUDIT}").scalar_one()
        )
    return Baseline(counts=counts, audit_id=audit_id)


def _has_audit(connection: Connection) -> bool:
    return bool(connection.exec_driver_sql(f"SELECT to_regclass('{AUDIT}')").scalar_one())


@dataclass(frozen=True)
class PlatformMessage:
    """One message a (fake) platform actually received: its platform and text."""

    platform: str
    text: str


@dataclass
class _Ledger:
    """The rows the checks read, loaded once."""

    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)


def _rows(connection: Connection, sql: str, **params: Any) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in connection.execute(text(sql), params)]


def check_invariants(
    target: Database | Connection,
    *,
    baseline: Baseline | None = None,
    settled: bool = True,
    now_ms: int | None = None,
    platform_messages: Sequence[PlatformMessage] | None = None,
) -> list[str]:
    """Every violation found, one clear message each; [] when the ledger is sound.

    `settled`: the scenario is over, so every input must have its final disposition.
    `baseline`: counts (and the audit position) from the scenario's start.
    `platform_messages`: what a fake platform received, to find a message sent twice.
    """
    if isinstance(target, Database):
        with target.engine.connect() as connection:
            return check_invariants(
                connection,
                baseline=baseline,
                settled=settled,
                now_ms=now_ms,
                platform_messages=platform_messages,
            )
    connection = target
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    ledger = _Ledger(
        turns={
            row["id"]: row
            for row in _rows(
                connection,
                "SELECT id, session_id, parent_turn_id, status, epoch, started_at, "
                "completed_at, abandoned_at FROM turns",
            )
        },
        sessions={
            row["id"]: row
            for row in _rows(connection, "SELECT id, label, thread_id, epoch FROM sessions")
        },
        items=_rows(
            connection,
            "SELECT id, session_id, event_id, mode, priority, status, disposition, "
            "consumed_by_turn_id, claim_expires_at, enqueued_at FROM queue_items",
        ),
    )
    chains = {sid: _walk_chain(ledger, session) for sid, session in ledger.sessions.items()}
    problems: list[str] = []
    problems += _dispositions(connection, ledger, settled=settled)
    problems += _expired_claims(ledger, now)
    problems += _one_chain(connection, ledger, chains)
    problems += _one_run_at_a_time(ledger, chains)
    problems += _epochs(connection, ledger, chains, baseline)
    problems += _tool_results(connection, ledger)
    problems += _deliveries(connection, ledger, platform_messages)
    problems += _nothing_deleted(connection, baseline)
    problems += _arrival_order(connection, ledger, chains)
    problems += _hooks_once(connection, settled=settled)
    if settled:
        problems += _no_input_left_in_an_aborted_turn(ledger, chains)
    return problems


def _label(ledger: _Ledger, session_id: str) -> str:
    session = ledger.sessions.get(session_id)
    return repr(session["label"]) if session else session_id


def _walk_chain(ledger: _Ledger, session: dict[str, Any]) -> list[str] | str:
    """The session's own turns from its root to its head, or what makes that impossible.

    A fork's first turn has its parent in another session: the walk stops there."""
    walked: list[str] = []
    seen: set[str] = set()
    current = session["thread_id"]
    while current is not None:
        turn = ledger.turns.get(current)
        if turn is None:
            return f"the chain reaches {current}, which is not a turn"
        if turn["session_id"] != session["id"]:
            break
        if current in seen:
            return f"the chain loops at turn {current}"
        seen.add(current)
        walked.append(current)
        current = turn["parent_turn_id"]
    walked.reverse()
    return walked


# -- every input has exactly one disposition -----------------------------------------------


def _dispositions(connection: Connection, ledger: _Ledger, *, settled: bool) -> list[str]:
    problems = []
    items_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in ledger.items:
        if item["event_id"] is not None:
            items_of[item["event_id"]].append(item)
    events = _rows(
        connection,
        "SELECT id, status, disposition FROM events WHERE direction = 'inbound' ORDER BY id",
    )
    for event in events:
        if event["status"] != "processed":
            if settled:
                problems.append(f"[disposition] event {event['id']!r} was never routed")
            continue
        if not event["disposition"]:
            problems.append(f"[disposition] event {event['id']!r} is processed without one")
        found = items_of.get(event["id"], [])
        if event["disposition"] == "queued" and len(found) != 1:
            problems.append(
                f"[disposition] event {event['id']!r} was queued but has {len(found)} queue items"
            )
        if event["disposition"] != "queued" and found:
            problems.append(
                f"[disposition] event {event['id']!r} is {event['disposition']!r} "
                f"yet has {len(found)} queue items"
            )
    for item in ledger.items:
        where = f"queue item {item['id']} (event {item['event_id']!r})"
        status, disposition, turn_id = (
            item["status"],
            item["disposition"],
            item["consumed_by_turn_id"],
        )
        if status in OPEN:
            if settled:
                problems.append(f"[disposition] {where} is still {status}")
            if disposition is not None:
                problems.append(f"[disposition] {where} is {status} with disposition {disposition}")
            continue
        if disposition not in FINAL.get(status, set()):
            problems.append(f"[disposition] {where} is {status} with disposition {disposition!r}")
        if status == QueueStatus.DONE:
            turn = ledger.turns.get(turn_id) if turn_id else None
            if (
                turn is None
                or turn["status"] not in CHAIN
                or turn["session_id"] != item["session_id"]
            ):
                problems.append(
                    f"[disposition] {where} is {disposition} by {turn_id!r}, which is not a "
                    "committed turn of its session"
                )
        elif turn_id is not None:
            problems.append(f"[disposition] {where} is {status} yet names turn {turn_id}")
    # One input, one answer: no event is asked in two committed turns of one session.
    asked = Counter(
        (ledger.turns[row["turn_id"]]["session_id"], row["event_id"])
        for row in _rows(
            connection,
            "SELECT DISTINCT turn_id, event_id FROM messages "
            "WHERE role = 'user' AND event_id IS NOT NULL",
        )
        if ledger.turns.get(row["turn_id"], {}).get("status") in CHAIN
    )
    for (session_id, event_id), count in sorted(asked.items()):
        if count > 1:
            problems.append(
                f"[disposition] event {event_id!r} was answered by {count} turns of session "
                f"{_label(ledger, session_id)}"
            )
    return problems


def _expired_claims(ledger: _Ledger, now: int) -> list[str]:
    return [
        f"[claims] queue item {item['id']} holds a claim that expired "
        f"{now - item['claim_expires_at']} ms ago"
        for item in ledger.items
        if item["status"] == QueueStatus.CLAIMED
        and item["claim_expires_at"] is not None
        and item["claim_expires_at"] <= now
    ]


def _no_input_left_in_an_aborted_turn(
    ledger: _Ledger, chains: dict[str, list[str] | str]
) -> list[str]:
    """Every input reaches a completed turn: directly, or folded into a later completed turn
    on the chain after a later input interrupted the turn it was in. An aborted turn with no
    completed turn after it on its chain left its inputs unanswered: nothing that came after
    them stopped it, so its own arrival did (none of these scenarios aborts by hand or runs
    into the time limit)."""
    problems = []
    consumed: dict[str, list[str]] = defaultdict(list)
    for item in ledger.items:
        if item["consumed_by_turn_id"] is not None:
            consumed[item["consumed_by_turn_id"]].append(item["id"])
    for session_id, chain in chains.items():
        if isinstance(chain, str):
            continue  # reported by the chain check
        statuses = [ledger.turns[turn_id]["status"] for turn_id in chain]
        answered_up_to = max(
            (n for n, status in enumerate(statuses) if status == "completed"), default=-1
        )
        for turn_id in chain[answered_up_to + 1 :]:
            if ledger.turns[turn_id]["status"] == "aborted" and consumed.get(turn_id):
                problems.append(
                    f"[interrupt] queue items {', '.join(sorted(consumed[turn_id]))} of session "
                    f"{_label(ledger, session_id)} were consumed by the aborted turn {turn_id} "
                    "and no later turn answered them"
                )
    return problems


def _hooks_once(connection: Connection, *, settled: bool) -> list[str]:
    """Every event's hooks are evaluated exactly once: once settled, no event still owes
    the hooks its evaluation (docs/hooks.md), and no hook has two calls on one event."""
    problems = []
    if settled:
        for row in _rows(
            connection,
            "SELECT id FROM events WHERE hooks_status = 'due' ORDER BY received_at, id",
        ):
            problems.append(f"[hooks] event {row['id']!r} still owes the hooks its evaluation")
    for row in _rows(
        connection,
        "SELECT event_id, hook_name, count(*) AS calls FROM hook_invocations "
        "WHERE event_id IS NOT NULL GROUP BY event_id, hook_name HAVING count(*) > 1 "
        "ORDER BY event_id, hook_name",
    ):
        problems.append(
            f"[hooks] hook {row['hook_name']!r} was evaluated {row['calls']} times on event "
            f"{row['event_id']!r}"
        )
    return problems


# -- one chain per session, one run at a time, epochs -----------------------------------------


def _one_chain(
    connection: Connection, ledger: _Ledger, chains: dict[str, list[str] | str]
) -> list[str]:
    problems = []
    threads = {
        row["turn_id"]: row
        for row in _rows(
            connection, "SELECT turn_id, parent_turn_id, session_id, depth FROM threads"
        )
    }
    moves: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _rows(
        connection,
        "SELECT session_id, thread_id, previous_thread_id, epoch, reason FROM session_history",
    ):
        if row["thread_id"] is not None:
            moves[row["thread_id"]].append(row)
    on_chain: dict[str, set[str]] = defaultdict(set)
    for turn in ledger.turns.values():
        # A rollback takes the turns after where it went back to off the chain (kept).
        if turn["status"] in CHAIN and turn["abandoned_at"] is None:
            on_chain[turn["session_id"]].add(turn["id"])
    for session_id in ledger.sessions:
        chain = chains[session_id]
        name = _label(ledger, session_id)
        if isinstance(chain, str):
            problems.append(f"[chain] session {name}: {chain}")
            continue
        if chain and ledger.turns[chain[-1]]["status"] not in CHAIN:
            problems.append(
                f"[chain] session {name}: its head is a {ledger.turns[chain[-1]]['status']} turn"
            )
        for turn_id in chain:
            if ledger.turns[turn_id]["status"] not in CHAIN:
                problems.append(
                    f"[chain] session {name}: turn {turn_id} on its chain is "
                    f"{ledger.turns[turn_id]['status']}"
                )
        for stray in sorted(on_chain[session_id] - set(chain)):
            problems.append(
                f"[chain] session {name}: committed turn {stray} is not on the chain from its "
                "head (a fork or a lost turn)"
            )
        children = Counter(ledger.turns[t]["parent_turn_id"] for t in on_chain[session_id])
        for parent, count in children.items():
            if count > 1:
                problems.append(f"[chain] session {name}: {count} committed turns extend {parent}")
    for turn in ledger.turns.values():
        problems += _thread_and_history(ledger, turn, threads, moves.get(turn["id"], []))
    return problems


def _thread_and_history(
    ledger: _Ledger,
    turn: dict[str, Any],
    threads: dict[str, dict[str, Any]],
    moves: list[dict[str, Any]],
) -> list[str]:
    turn_id, problems = turn["id"], []
    thread = threads.get(turn_id)
    own_moves = [
        m
        for m in moves
        if m["session_id"] == turn["session_id"] and m["reason"] not in ("fork", "rollback")
    ]
    if turn["status"] not in CHAIN:
        if thread is not None or own_moves:
            problems.append(
                f"[chain] {turn['status']} turn {turn_id} has a thread row or moved a head"
            )
        return problems
    if thread is None:
        return [f"[chain] committed turn {turn_id} has no thread row"]
    parent = turn["parent_turn_id"]
    expected_depth = 1 if parent is None else (threads.get(parent) or {}).get("depth", -1) + 1
    if thread["parent_turn_id"] != parent or thread["depth"] != expected_depth:
        problems.append(
            f"[chain] turn {turn_id}: thread row says parent {thread['parent_turn_id']} depth "
            f"{thread['depth']}, the turn says parent {parent} (depth {expected_depth})"
        )
    if len(own_moves) != 1:
        problems.append(
            f"[chain] turn {turn_id} moved its session's head {len(own_moves)} times (want 1)"
        )
    elif own_moves[0]["previous_thread_id"] != parent or own_moves[0]["epoch"] != turn["epoch"]:
        problems.append(
            f"[chain] turn {turn_id}: its pointer move names previous "
            f"{own_moves[0]['previous_thread_id']} at epoch {own_moves[0]['epoch']}, the turn "
            f"has parent {parent} at epoch {turn['epoch']}"
        )
    return problems


def _one_run_at_a_time(ledger: _Ledger, chains: dict[str, list[str] | str]) -> list[str]:
    """Committed turns of one session never ran at the same time: each began after the
    previous one on the chain was done."""
    problems = []
    for session_id, chain in chains.items():
        if isinstance(chain, str):
            continue
        for earlier, later in pairwise(ledger.turns[t] for t in chain):
            done = earlier["completed_at"]
            if done is None or done > later["started_at"]:
                problems.append(
                    f"[one run] session {_label(ledger, session_id)}: turn {later['id']} started "
                    f"at {later['started_at']} while turn {earlier['id']} ran until {done}"
                )
    return problems


def _epochs(
    connection: Connection,
    ledger: _Ledger,
    chains: dict[str, list[str] | str],
    baseline: Baseline | None,
) -> list[str]:
    problems = []
    newest: dict[str, int] = defaultdict(int)
    for turn in ledger.turns.values():
        newest[turn["session_id"]] = max(newest[turn["session_id"]], turn["epoch"])
    for session_id, session in ledger.sessions.items():
        name = _label(ledger, session_id)
        if newest[session_id] > session["epoch"]:
            problems.append(
                f"[epochs] session {name} is at epoch {session['epoch']} but a turn ran at "
                f"{newest[session_id]}"
            )
        chain = chains[session_id]
        if isinstance(chain, str):
            continue
        for earlier, later in pairwise(ledger.turns[t] for t in chain):
            if later["epoch"] < earlier["epoch"]:
                problems.append(
                    f"[epochs] session {name}: turn {later['id']} (epoch {later['epoch']}) "
                    f"follows turn {earlier['id']} (epoch {earlier['epoch']})"
                )
    if baseline is not None and baseline.audit_id is not None:
        for row in _rows(
            connection,
            f"SELECT detail FROM {AUDIT} WHERE id > :after AND what = 'EPOCH DOWN'",
            after=baseline.audit_id,
        ):
            problems.append(f"[epochs] an epoch went down: {row['detail']}")
    return problems


# -- tool calls, deliveries, deletions, order ----------------------------------------------


def _tool_results(connection: Connection, ledger: _Ledger) -> list[str]:
    """In a committed turn every tool_use is answered by a later tool_result, and no tool
    call is left pending (the model's next call, and any fork, would be refused)."""
    problems = []
    calls: dict[tuple[str, str], int] = {}
    results: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in _rows(
        connection,
        "SELECT turn_id, role, tool_call_id, sequence FROM messages "
        "WHERE role IN ('tool_call', 'tool_result')",
    ):
        if ledger.turns.get(row["turn_id"], {}).get("status") not in CHAIN:
            continue
        key = (row["turn_id"], row["tool_call_id"])
        if row["role"] == "tool_call":
            calls[key] = row["sequence"]
        else:
            results[key].append(row["sequence"])
    for (turn_id, call_id), sequence in sorted(calls.items()):
        answers = [s for s in results.get((turn_id, call_id), []) if s > sequence]
        if len(answers) != 1:
            problems.append(
                f"[tool_result] turn {turn_id}: tool_use {call_id} has {len(answers)} results"
            )
    for turn_id, call_id in sorted(set(results) - set(calls)):
        problems.append(f"[tool_result] turn {turn_id}: result for unknown tool_use {call_id}")
    for row in _rows(
        connection, "SELECT turn_id, provider_call_id FROM tool_calls WHERE status = 'pending'"
    ):
        if ledger.turns.get(row["turn_id"], {}).get("status") in CHAIN:
            problems.append(
                f"[tool_result] turn {row['turn_id']}: tool call {row['provider_call_id']} is "
                "still pending"
            )
    return problems


def _deliveries(
    connection: Connection, ledger: _Ledger, platform: Sequence[PlatformMessage] | None
) -> list[str]:
    problems = []
    rows = _rows(
        connection, "SELECT id, turn_id, chunk_index, platform, text, status FROM deliveries"
    )
    for (turn_id, chunk), count in Counter((r["turn_id"], r["chunk_index"]) for r in rows).items():
        if count > 1:
            problems.append(f"[delivery] turn {turn_id} chunk {chunk} has {count} deliveries")
    for row in rows:
        if ledger.turns.get(row["turn_id"], {}).get("status") not in CHAIN:
            problems.append(
                f"[delivery] delivery {row['id']} sends turn {row['turn_id']}, which never "
                "joined a chain"
            )
    if platform is not None:
        intended = Counter((r["platform"], r["text"]) for r in rows)
        for (name, body), count in Counter((m.platform, m.text) for m in platform).items():
            if count > intended[(name, body)]:
                problems.append(
                    f"[delivery] {name} received {body[:60]!r} {count} times; the ledger "
                    f"meant to send it {intended[(name, body)]} times"
                )
    return problems


def _nothing_deleted(connection: Connection, baseline: Baseline | None) -> list[str]:
    if baseline is None:
        return []
    problems = []
    for table, before in baseline.counts.items():
        after = int(connection.exec_driver_sql(f'SELECT count(*) FROM "{table}"').scalar_one())
        if after < before:
            problems.append(f"[append-only] {table} went from {before} rows to {after}")
    if baseline.audit_id is not None:
        for row in _rows(
            connection,
            f"SELECT tbl, what, detail FROM {AUDIT} WHERE id > :after AND what <> 'EPOCH DOWN'",
            after=baseline.audit_id,
        ):
            detail = f": {row['detail'][:120]}" if row["detail"] else ""
            problems.append(f"[append-only] {row['what']} on {row['tbl']}{detail}")
    return problems


def _arrival_order(
    connection: Connection, ledger: _Ledger, chains: dict[str, list[str] | str]
) -> list[str]:
    """Inputs are answered in the order they were queued: along the chain, and inside one
    batch turn. The modes' own exceptions: a steer is injected into whichever turn is
    running, and a higher priority goes first (the claim's order)."""
    problems = []
    position: dict[str, int] = {}
    for chain in chains.values():
        if not isinstance(chain, str):
            position.update((turn_id, n) for n, turn_id in enumerate(chain))
    asked: dict[str, list[str]] = defaultdict(list)
    for row in _rows(
        connection,
        "SELECT turn_id, event_id FROM messages WHERE role = 'user' AND event_id IS NOT NULL "
        "ORDER BY turn_id, sequence",
    ):
        asked[row["turn_id"]].append(row["event_id"])
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in ledger.items:
        if item["status"] == QueueStatus.DONE and item["disposition"] != Disposition.INJECTED:
            by_session[item["session_id"]].append(item)
    for session_id, items in by_session.items():
        items.sort(key=lambda i: (-i["priority"], i["enqueued_at"], i["id"]))
        # An answer a rollback abandoned is off the chain: its order no longer counts.
        answered = [
            (position.get(i["consumed_by_turn_id"], -1), i)
            for i in items
            if (ledger.turns.get(i["consumed_by_turn_id"]) or {}).get("abandoned_at") is None
        ]
        for (at, first), (later_at, second) in pairwise(answered):
            if later_at < at:
                problems.append(
                    f"[order] session {_label(ledger, session_id)}: {second['event_id']!r} was "
                    f"queued after {first['event_id']!r} but answered before it"
                )
                break
        for turn_id in {i["consumed_by_turn_id"] for i in items}:
            queued = [i["event_id"] for i in items if i["consumed_by_turn_id"] == turn_id]
            in_turn = [e for e in asked.get(turn_id, []) if e in set(queued)]
            if in_turn != [e for e in queued if e in set(in_turn)]:
                problems.append(
                    f"[order] turn {turn_id} asks {in_turn} but they were queued as {queued}"
                )
    return problems


def check_inputs(target: Database | Connection, accepted: Collection[str]) -> list[str]:
    """After hostile deliveries: the inbound events are exactly the ones a platform was told
    were accepted (a refused delivery stored nothing), each with one row."""
    if isinstance(target, Database):
        with target.engine.connect() as connection:
            return check_inputs(connection, accepted)
    stored = set(
        target.exec_driver_sql("SELECT id FROM events WHERE direction = 'inbound'").scalars()
    )
    problems = [f"[inputs] accepted event {i!r} has no row" for i in sorted(set(accepted) - stored)]
    problems += [
        f"[inputs] event {i!r} was stored but no delivery was accepted for it"
        for i in sorted(stored - set(accepted))
    ]
    return problems
