"""Credentials and sandbox: reading permissions, secrets files, scrubbing (pure parts)."""

from __future__ import annotations

import pytest

from nexus.engine.credentials import (
    Scrubber,
    Secrets,
    credential_ids,
    env_name,
)
from nexus.engine.permissions import read_permissions
from nexus.engine.sandbox import SandboxConfig
from nexus.ledger.enums import MessageRole, ToolCallStatus
from nexus.ledger.records import MessageDraft, ToolCallDraft
from nexus.logs import REDACTED
from nexus.secrets_file import SecretsFileError, parse_secrets

SECRET = "ghp_s3cret-value-42"


def test_permissions_read_tools_credentials_and_sandbox() -> None:
    read = read_permissions(
        {
            "tools": {"deny": ["files.*"]},
            "credentials": ["github", "weather_api"],
            "sandbox": {"timeout_seconds": 5, "memory_mb": 128},
        }
    )
    assert read.tools.deny == ("files.*",)
    assert read.credentials == ("github", "weather_api")
    assert read.sandbox == SandboxConfig(timeout_seconds=5.0, memory_mb=128)
    assert read_permissions({"sandbox": {}}).sandbox == SandboxConfig()
    granted = read_permissions({"sandbox": {"network": True}}).sandbox
    assert granted == SandboxConfig(network=True) and SandboxConfig().network is False
    empty = read_permissions({})
    assert empty.credentials == () and empty.sandbox is None


@pytest.mark.parametrize(
    ("permissions", "says"),
    [
        ({"credential": ["github"]}, "unknown keys: credential"),
        ({"credentials": "github"}, "must be a list"),
        ({"credentials": ["GitHub"]}, "'GitHub' is not a credential id"),
        ({"credentials": ["has space"]}, "is not a credential id"),
        ({"credentials": ["x" * 65]}, "is not a credential id"),
        ({"credentials": ["github", "github"]}, "twice"),
        ({"sandbox": True}, "must be an object"),
        ({"sandbox": {"disk": True}}, "unknown keys: disk"),
        ({"sandbox": {"network": "yes"}}, "network"),
        ({"sandbox": {"timeout_seconds": 0}}, "timeout_seconds"),
        ({"sandbox": {"timeout_seconds": True}}, "timeout_seconds"),
        ({"sandbox": {"memory_mb": 10}}, "memory_mb"),
        ({"sandbox": {"memory_mb": 100.5}}, "memory_mb"),
    ],
)
def test_bad_permissions_say_what_is_wrong(permissions: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        read_permissions(permissions)


def test_a_credential_id_names_one_environment_variable() -> None:
    assert env_name("weather_api") == "NEXUS_CREDENTIAL_WEATHER_API"
    assert credential_ids(["a1", "b_2"]) == ("a1", "b_2")


@pytest.mark.parametrize(
    ("kind", "text"),
    [  # @ stands for the secret
        ("json", '{"github": "@"}'),
        ("toml", 'github = "@"\n'),
        ("yaml", "github: @\n"),
    ],
)
def test_a_secrets_file_is_json_toml_or_yaml(kind: str, text: str) -> None:
    assert parse_secrets(text.replace("@", SECRET), kind, "f") == {"github": SECRET}


@pytest.mark.parametrize(
    ("kind", "text", "says"),
    [
        ("json", '{"github": "@"', "not valid JSON (line 1)"),
        ("toml", 'ok = "x"\ngithub = @\n', "not valid TOML (line 2)"),
        ("yaml", "a: b\ngithub: [@\n", "not valid YAML"),
        ("yaml", "- @\n", "must hold a mapping"),
        ("json", '{"GitHub": "@"}', "'GitHub' is not a credential id"),
        ("json", '{"github": 42}', "the secret of 'github' must be a string"),
        ("ini", "github=x", "unknown format"),
    ],
)
def test_a_bad_secrets_file_is_a_clear_error_that_quotes_no_secret(
    kind: str, text: str, says: str
) -> None:
    with pytest.raises(SecretsFileError, match=r"^secrets\.x: ") as caught:
        parse_secrets(text.replace("@", SECRET), kind, "secrets.x")
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_scrubber_replaces_secrets_deep_inside_values_and_drafts() -> None:
    scrubber = Scrubber([SECRET, "other-secret"])
    value = {"a": [f"token={SECRET};", ("x", "other-secret")], SECRET: 3, "n": 7}
    assert scrubber.scrub(value) == {
        "a": [f"token={REDACTED};", ("x", REDACTED)],
        REDACTED: 3,
        "n": 7,
    }
    message = MessageDraft(
        role=MessageRole.TOOL_RESULT, content={"result": {"echo": SECRET}}, tool_call_id="t1"
    )
    call = ToolCallDraft(
        provider_call_id="t1",
        tool_name="echo",
        parameters={"q": SECRET},
        result=SECRET,
        error=f"failed with {SECRET}",
        status=ToolCallStatus.FAILED,
        started_at=1,
        completed_at=2,
    )
    clean_message, clean_call = scrubber.scrub((message, call))
    assert clean_message.content == {"result": {"echo": REDACTED}}
    assert clean_message.role is MessageRole.TOOL_RESULT and clean_message.tool_call_id == "t1"
    assert clean_call.parameters == {"q": REDACTED} and clean_call.result == REDACTED
    assert clean_call.error == f"failed with {REDACTED}"
    assert scrubber.scrub({"a": "plain"}) == {"a": "plain"}
    assert Scrubber().scrub(value) is value  # nothing handed out yet: nothing to do


def test_a_secret_contained_in_another_leaves_no_partial_leftovers() -> None:
    assert Scrubber(["abcd", "abcdefgh"]).text("xabcdefghx abcd") == f"x{REDACTED}x {REDACTED}"


def test_too_short_a_secret_is_refused_rather_than_scrubbing_ordinary_words() -> None:
    with pytest.raises(ValueError, match="shorter than 4"):
        Scrubber(["abc"])


def test_secrets_never_show_their_values_in_a_repr() -> None:
    secrets = Secrets({"github": SECRET})
    assert secrets["github"] == SECRET and list(secrets) == ["github"]
    assert SECRET not in repr(secrets) and "github" in repr(secrets)
