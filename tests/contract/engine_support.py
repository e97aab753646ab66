"""Builders for engine tests: a persona with tools, an engine on the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus.adapters.anthropic.model import AnthropicModel
from nexus.adapters.scripted import ScriptedModel
from nexus.db import Database
from nexus.engine.builtin_tools import builtin_registry
from nexus.engine.capabilities import Capability, CapabilityRegistry
from nexus.engine.credentials import NoSecrets, SecretSource
from nexus.engine.model import ToolSpec
from nexus.engine.outcomes import TurnOutcome
from nexus.engine.query import QueryMessage
from nexus.engine.signals import InProcessSignals
from nexus.engine.stream import RecordingPublisher
from nexus.engine.tools import Tool, ToolContext, ToolRegistry
from nexus.ledger.records import NewSession, SessionRecord
from nexus.turns.service import TurnService
from tests.support import FakeClock


@dataclass
class RecordingTool:
    """A tool that remembers every call, so a test can prove one never ran."""

    name: str
    answer: Any = "done"
    calls: list[dict[str, Any]] = field(default_factory=list)
    on_call: Callable[[], None] | None = None

    def tool(self) -> Tool:
        def run(arguments: dict[str, Any], context: ToolContext) -> Any:
            self.calls.append(arguments)
            if self.on_call is not None:
                self.on_call()
            return self.answer

        spec = ToolSpec(
            name=self.name,
            description=f"test tool {self.name}",
            input_schema={"type": "object", "properties": {}},
        )
        return Tool(spec=spec, run=run)


def registry_with(*extra: RecordingTool | Tool) -> ToolRegistry:
    registry = builtin_registry()
    for tool in extra:
        registry.register(tool if isinstance(tool, Tool) else tool.tool())
    return registry


def capabilities_with(tool_names: Sequence[str]) -> CapabilityRegistry:
    registry = CapabilityRegistry()
    if tool_names:
        registry.register(
            Capability(
                id="test_tools",
                name="Test tools",
                description="tools for tests",
                status="available",
                prompt_addition="You can use the test tools.",
                tool_names=tuple(tool_names),
            )
        )
    return registry


@dataclass
class Rig:
    turns: TurnService
    model: ScriptedModel
    publisher: RecordingPublisher
    signals: InProcessSignals
    database: Database

    def session(
        self,
        label: str = "dm:ent_test",
        *,
        persona: str = "assistant",
        permissions: dict[str, Any] | None = None,
        capabilities: Sequence[str] = (),
    ) -> SessionRecord:
        with self.database.unit_of_work() as uow:
            agent = uow.ledger.agents.ensure(persona, system_prompt="You help with tests.")
            if permissions is not None:
                uow.ledger.agents.configure(agent.id, permissions=permissions)
            chosen = [self.turns.capabilities.get(c) for c in capabilities]
            uow.ledger.agents.set_capabilities(
                agent.id, [(c.id, c.name, c.description, c.status) for c in chosen]
            )
            session = uow.ledger.sessions.ensure(NewSession(label=label, persona_id=agent.id))
            uow.commit()
        return session

    def say(self, session_id: str, text: str, **query: Any) -> TurnOutcome:
        with self.database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(session_id)
            uow.commit()
        return self.turns.run_turn(session_id, [QueryMessage(text=text, **query)], epoch=epoch)


def build_rig(
    database: Database,
    clock: FakeClock,
    *,
    tools: Sequence[RecordingTool | Tool] = (),
    granted: Sequence[str] = (),
    window: int | None = None,
    secrets: SecretSource | None = None,
) -> Rig:
    model = ScriptedModel()
    publisher = RecordingPublisher()
    signals = InProcessSignals()
    turns = TurnService(
        database=database,
        model_for=lambda name: model,
        default_model="scripted",
        tools=registry_with(*tools),
        capabilities=capabilities_with(granted),
        signals=signals,
        publisher=publisher,
        clock=clock,
        context_window=window,
        secrets=secrets or NoSecrets(),
    )
    return Rig(turns, model, publisher, signals, database)


def on_anthropic(rig: Rig, base_url: str, model: str, *, max_retries: int = 0) -> Rig:
    """The rig's engine answering through the real Anthropic SDK, at `base_url` (the fake
    Messages API), with `model` as its default."""
    port = AnthropicModel(api_key="sk-test", base_url=base_url, max_retries=max_retries)
    rig.turns.model_for = lambda name: port
    rig.turns.default_model = model
    return rig
