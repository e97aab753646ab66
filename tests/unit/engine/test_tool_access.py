"""The toolbox's credential and sandbox checks: who gets which secret, who may run code."""

from __future__ import annotations

from typing import Any

from nexus.engine.credentials import CredentialError, NoSecrets
from nexus.engine.model import ToolSpec
from nexus.engine.permissions import read_permissions
from nexus.engine.sandbox import SandboxConfig
from nexus.engine.toolbox import Toolbox
from nexus.engine.tools import Tool, ToolContext, ToolFailure, ToolRegistry
from nexus.logs import REDACTED

CONTEXT = ToolContext(session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=0)
SECRETS = {"github": "ghp_token-1111", "slack": "xoxb-token-2222"}


class DictSecrets:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.asked: list[str] = []

    def secret(self, credential_id: str) -> str:
        self.asked.append(credential_id)
        if credential_id not in self.values:
            raise CredentialError(f"credential {credential_id!r} is not configured")
        return self.values[credential_id]

    def hosts(self, credential_id: str) -> tuple[str, ...]:
        return (f"{credential_id}.example.com",)


class Seen:
    def __init__(self) -> None:
        self.contexts: list[ToolContext] = []

    def tool(self, name: str, answer: Any = None, **options: Any) -> Tool:
        def run(arguments: dict[str, Any], context: ToolContext) -> Any:
            self.contexts.append(context)
            return answer(context) if callable(answer) else answer

        schema = {"type": "object", "properties": {"credential": {"type": "string"}}}
        return Tool(ToolSpec(name, "", schema), run, **options)


def _box(tools: list[Tool], permissions: dict[str, Any], secrets: Any = None) -> Toolbox:
    return Toolbox(
        ToolRegistry(tools),
        read_permissions(permissions),
        [t.spec.name for t in tools],
        secrets=secrets if secrets is not None else DictSecrets(SECRETS),
    )


def test_a_tool_gets_only_the_credentials_it_declares_and_the_persona_lists() -> None:
    seen = Seen()
    tool = seen.tool("gh", "ok", credentials=("github",))
    box = _box([tool], {"credentials": ["github", "slack"]})
    assert box.execute("gh", {}, CONTEXT).status == "completed"
    [context] = seen.contexts
    assert dict(context.credentials) == {"github": SECRETS["github"]}  # not slack's too


def test_a_credential_the_persona_does_not_list_is_refused_before_anything_is_looked_up() -> None:
    seen, secrets = Seen(), DictSecrets(SECRETS)
    tool = seen.tool("gh", "ok", credentials=("github",))
    box = _box([tool], {"credentials": ["slack"]}, secrets)
    assert box.visible_specs() == []  # it could never run for this persona: not offered
    outcome = box.execute("gh", {}, CONTEXT)
    assert outcome.status == "denied"
    assert outcome.error is not None and "needs credential 'github'" in outcome.error
    assert "permissions.credentials" in outcome.error
    assert seen.contexts == [] and secrets.asked == []


def test_a_credential_named_by_an_argument_is_checked_against_the_persona() -> None:
    seen = Seen()
    tool = seen.tool("fetch", "ok", credential_argument="credential")
    box = _box([tool], {"credentials": ["github"]})
    assert [s.name for s in box.visible_specs()] == ["fetch"]  # usable with github, or none
    refused = box.execute("fetch", {"credential": "slack"}, CONTEXT)
    assert refused.status == "denied" and "'slack'" in (refused.error or "")
    assert box.execute("fetch", {"credential": "github"}, CONTEXT).status == "completed"
    assert box.execute("fetch", {}, CONTEXT).status == "completed"
    assert [dict(c.credentials) for c in seen.contexts] == [{"github": SECRETS["github"]}, {}]


def test_an_unconfigured_credential_is_a_tool_error_and_the_tool_never_runs() -> None:
    seen = Seen()
    tool = seen.tool("gh", "ok", credentials=("github",))
    box = _box([tool], {"credentials": ["github"]}, DictSecrets({}))
    outcome = box.execute("gh", {}, CONTEXT)
    assert outcome.status == "failed"
    assert outcome.error == "gh cannot run: credential 'github' is not configured"
    assert seen.contexts == []
    none = _box([tool], {"credentials": ["github"]}, NoSecrets()).execute("gh", {}, CONTEXT)
    assert "NEXUS_CREDENTIAL_GITHUB" in (none.error or "")


def test_a_too_short_secret_is_refused_rather_than_handed_out_unscrubbable() -> None:
    seen = Seen()
    tool = seen.tool("gh", "ok", credentials=("github",))
    box = _box([tool], {"credentials": ["github"]}, DictSecrets({"github": "abc"}))
    outcome = box.execute("gh", {}, CONTEXT)
    assert outcome.status == "failed" and "shorter than 4" in (outcome.error or "")
    assert seen.contexts == []


def test_a_secret_echoed_in_a_result_or_an_error_is_scrubbed() -> None:
    seen = Seen()
    echo = seen.tool("echo", lambda c: {"got": f"Bearer {c.credentials['github']}"})
    echo = Tool(echo.spec, echo.run, credentials=("github",))

    def leaky(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise ToolFailure(f"401 for token {context.credentials['github']}")

    def buggy(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise RuntimeError(context.credentials["github"])

    tools = [
        echo,
        Tool(ToolSpec("leaky", "", {"type": "object"}), leaky, credentials=("github",)),
        Tool(ToolSpec("buggy", "", {"type": "object"}), buggy, credentials=("github",)),
    ]
    box = _box(tools, {"credentials": ["github"]})
    assert box.execute("echo", {}, CONTEXT).result == {"got": f"Bearer {REDACTED}"}
    assert box.execute("leaky", {}, CONTEXT).error == f"401 for token {REDACTED}"
    assert box.execute("buggy", {}, CONTEXT).error == f"buggy failed: RuntimeError: {REDACTED}"
    # And whatever else the turn stores, once the secret was handed out.
    assert box.scrub({"arguments": SECRETS["github"]}) == {"arguments": REDACTED}


def test_a_sandboxed_tool_needs_the_personas_sandbox_and_gets_its_limits() -> None:
    seen = Seen()
    tool = seen.tool("run", "ran", sandboxed=True)
    without = _box([tool], {})
    assert without.visible_specs() == []
    outcome = without.execute("run", {}, CONTEXT)
    assert outcome.status == "denied"
    assert "runs code or touches files" in (outcome.error or "")
    assert "permissions.sandbox" in (outcome.error or "")
    assert seen.contexts == []
    within = _box([tool], {"sandbox": {"timeout_seconds": 3}})
    assert [s.name for s in within.visible_specs()] == ["run"]
    assert within.execute("run", {}, CONTEXT).result == "ran"
    assert seen.contexts[0].sandbox == SandboxConfig(timeout_seconds=3.0)


def test_deny_still_wins_over_a_sandbox_and_credentials() -> None:
    seen = Seen()
    tool = seen.tool("run", "ran", sandboxed=True, credentials=("github",))
    box = _box([tool], {"tools": {"deny": ["run"]}, "sandbox": {}, "credentials": ["github"]})
    assert box.execute("run", {}, CONTEXT).status == "denied" and seen.contexts == []
