"""Context layers on the ledger: the workspace in every turn, the manager's and the worker's
rules, and a worker that inherits its manager's persona (identity and permissions)."""

from __future__ import annotations

from pathlib import Path

from nexus.adapters.scripted import CallTools, Say
from nexus.db import Database
from nexus.engine.model import ModelRequest
from nexus.engine.workspace import Workspace
from tests.contract.agent_support import Office, ask, build_office, workers_of
from tests.contract.engine_support import build_rig
from tests.support import FakeClock


def _layers(request: ModelRequest) -> list[str]:
    assert not isinstance(request.system, str)
    return [str(block["text"]) for block in request.system]


def _role(request: ModelRequest) -> str:
    (role,) = [text for text in _layers(request) if text.startswith("[Your role:")]
    return role


def _tools(request: ModelRequest) -> set[str]:
    return {tool.name for tool in request.tools}


def test_every_turn_carries_the_workspace_files(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("Always answer in French.")
    (tmp_path / "USER.md").write_text("The user is Ada.")
    rig = build_rig(database, clock)
    rig.turns.workspace = Workspace(tmp_path)
    session = rig.session()
    rig.say(session.id, "hello")
    rig.say(session.id, "again")
    for request in rig.model.requests:
        texts = _layers(request)
        assert texts[0].startswith("You are assistant.")
        assert texts[1] == (
            "[Workspace file AGENTS.md]\nAlways answer in French.\n\n"
            "[Workspace file USER.md]\nThe user is Ada."
        )
    assert rig.turns.workspace.reads == 1  # the second turn found the files unchanged


def _office_with_a_careful_persona(database: Database, clock: FakeClock) -> Office:
    office = build_office(database, clock)
    with database.unit_of_work() as uow:
        uow.ledger.agents.configure(
            office.manager.persona_id,
            system_prompt="You plan trips carefully.",
            permissions={"tools": {"deny": ["current_time"]}},
        )
        uow.commit()
    return office


def test_a_worker_inherits_the_managers_persona_and_gets_the_worker_rules(
    database: Database, clock: FakeClock
) -> None:
    office = _office_with_a_careful_persona(database, clock)
    office.model.push(
        CallTools((("agent_send", {"op": "dispatch", "text": "price the flights"}),)),
        Say("A worker is on it."),
    )
    ask(office, office.manager.id, "plan the Lisbon trip", "api:trip")
    office.runner.run(office.manager.id)
    manager_request = office.model.requests[0]
    (worker,) = workers_of(office)
    assert worker.persona_id == office.manager.persona_id
    office.model.push(Say("flights: 320 EUR"))
    office.runner.run(worker.id)
    worker_request = office.model.requests[-1]

    identity = "You are atlas.\n\nYou plan trips carefully."
    assert _layers(manager_request)[0] == _layers(worker_request)[0] == identity
    # The manager's permissions hold for the worker: the denied tool is hidden from both.
    assert "current_time" not in _tools(manager_request) | _tools(worker_request)
    assert {"agent_send", "reply_to_caller"} <= _tools(worker_request)
    assert _role(manager_request).startswith("[Your role: manager agent]")
    worker_role = _role(worker_request)
    assert worker_role.startswith("[Your role: worker agent]")
    assert "price the flights" in worker_role and office.manager.label in worker_role


def test_a_dispatch_may_name_another_persona_for_its_worker(
    database: Database, clock: FakeClock
) -> None:
    office = _office_with_a_careful_persona(database, clock)
    with database.unit_of_work() as uow:
        scout = uow.ledger.agents.ensure("scout", system_prompt="You search fast.")
        uow.commit()
    office.model.push(
        CallTools(
            (
                ("agent_send", {"op": "dispatch", "text": "find hotels", "persona": "scout"}),
                ("agent_send", {"op": "dispatch", "text": "find cars", "persona": "nobody"}),
            )
        ),
        Say("Asked the scout."),
    )
    ask(office, office.manager.id, "plan the Lisbon trip", "api:trip")
    office.runner.run(office.manager.id)
    (worker,) = workers_of(office)  # the unknown persona was a tool error, no worker
    assert worker.persona_id == scout.id and worker.task_description == "find hotels"
    results = str(office.model.requests[1].messages)
    assert "no persona 'nobody'" in results
    office.model.push(Say("hotels: 95 EUR"))
    office.runner.run(worker.id)
    assert _layers(office.model.requests[-1])[0] == "You are scout.\n\nYou search fast."


def test_a_persona_reads_its_own_workspace_copy_and_its_workers_too(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("Shared rules.")
    own = tmp_path / "personas" / "atlas"
    own.mkdir(parents=True)
    (own / "AGENTS.md").write_text("Atlas's rules.")
    office = build_office(database, clock)
    office.runner.turns.workspace = Workspace(tmp_path)
    office.model.push(
        CallTools((("agent_send", {"op": "dispatch", "text": "price the flights"}),)), Say("ok")
    )
    ask(office, office.manager.id, "plan the Lisbon trip", "api:trip")
    office.runner.run(office.manager.id)
    (worker,) = workers_of(office)
    office.model.push(Say("320 EUR"))
    office.runner.run(worker.id)
    for request in (office.model.requests[0], office.model.requests[-1]):
        assert _layers(request)[1] == "[Workspace file AGENTS.md]\nAtlas's rules."
