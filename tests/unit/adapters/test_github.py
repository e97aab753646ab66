"""GitHub: the docs' published signature values and octokit-shaped deliveries."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.github import GitHubAdapter
from nexus.event import NexusEvent

# "Validating webhook deliveries" in GitHub's docs publishes exactly these values.
DOCS_SECRET = "It's a Secret to Everybody"
DOCS_BODY = b"Hello, World!"
DOCS_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
SECRET = "gh-secret"
REPO = {"id": 186853002, "full_name": "Codertocat/Hello-World", "name": "Hello-World"}
USER = {"login": "Codertocat", "id": 21031067, "type": "User"}
ISSUE = {
    "number": 1,
    "title": "Spelling error in the README file",
    "body": "It looks like you accidently spelled 'commit' with two 't's.",
    "html_url": "https://github.com/Codertocat/Hello-World/issues/1",
    "created_at": "2019-05-15T15:20:18Z",
    "user": USER,
}


def _request(name: str, payload: dict[str, Any], delivery: str = "72d3162e-cc78") -> InboundRequest:
    body = json.dumps(payload).encode()
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "x-hub-signature-256": f"sha256={digest}",
        "x-github-event": name,
        "x-github-delivery": delivery,
    }
    return InboundRequest("POST", "https://x", headers, body)


def _parse(name: str, payload: dict[str, Any]) -> NexusEvent:
    adapter = GitHubAdapter(SECRET)
    request = _request(name, payload)
    adapter.verify(request, now_ms=0)
    (event,) = adapter.parse(request).events
    return event


def test_the_docs_vector_verifies_and_tampering_does_not() -> None:
    def request(body: bytes) -> InboundRequest:
        return InboundRequest("POST", "https://x", {"x-hub-signature-256": DOCS_SIGNATURE}, body)

    GitHubAdapter(DOCS_SECRET).verify(request(DOCS_BODY), now_ms=0)
    with pytest.raises(SignatureRejected, match="does not match"):
        GitHubAdapter(DOCS_SECRET).verify(request(b"Hello, World?"), now_ms=0)
    with pytest.raises(SignatureRejected, match="does not match"):
        GitHubAdapter("another secret").verify(request(DOCS_BODY), now_ms=0)
    with pytest.raises(SignatureRejected, match="missing"):
        GitHubAdapter(DOCS_SECRET).verify(InboundRequest("POST", "x", {}, DOCS_BODY), now_ms=0)
    with pytest.raises(SignatureRejected, match="NEXUS_GITHUB_WEBHOOK_SECRET"):
        GitHubAdapter(None).verify(request(DOCS_BODY), now_ms=0)


def test_an_issue_comment_is_a_message_in_the_issue_thread() -> None:
    comment = {
        "id": 492700400,
        "html_url": "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400",
        "body": "You are totally right! I'll get this fixed right away.",
        "created_at": "2019-05-15T15:20:21Z",
        "user": USER,
    }
    event = _parse(
        "issue_comment",
        {
            "action": "created",
            "issue": ISSUE,
            "comment": comment,
            "repository": REPO,
            "sender": USER,
        },
    )
    assert event.id == "github:72d3162e-cc78" and event.routable
    assert event.text == "You are totally right! I'll get this fixed right away."
    assert event.container is not None and event.container.id == "Codertocat/Hello-World"
    assert (event.platform_thread_id, event.message_id) == ("1", comment["html_url"])
    assert event.occurred_at == 1557933621000


def test_an_opened_issue_and_pull_request_carry_title_and_body() -> None:
    issue = _parse(
        "issues", {"action": "opened", "issue": ISSUE, "repository": REPO, "sender": USER}
    )
    assert issue.text == f"{ISSUE['title']}\n\n{ISSUE['body']}"
    pull = _parse(
        "pull_request",
        {
            "action": "opened",
            "number": 2,
            "repository": REPO,
            "pull_request": {**ISSUE, "number": 2, "title": "Update"},
            "sender": USER,
        },
    )
    assert pull.routable and pull.platform_thread_id == "2"
    assert pull.text is not None and pull.text.startswith("Update")


def test_ping_edits_bots_and_other_events_are_recorded_not_routed() -> None:
    ping = _parse(
        "ping", {"zen": "Design for failure.", "hook_id": 1, "repository": REPO, "sender": USER}
    )
    edited = _parse(
        "issues", {"action": "edited", "issue": ISSUE, "repository": REPO, "sender": USER}
    )
    bot = _parse(
        "issue_comment",
        {
            "action": "created",
            "issue": ISSUE,
            "repository": REPO,
            "comment": {"body": "Deployed"},
            "sender": {"login": "nexus[bot]", "type": "Bot"},
        },
    )
    push = _parse("push", {"ref": "refs/tags/simple-tag", "repository": REPO, "sender": USER})
    assert (ping.kind, edited.kind, bot.kind, push.kind) == ("system", "edit", "bot_echo", "system")
    assert ping.ignore_reason == "webhook ping: Design for failure."
    assert push.ignore_reason is not None and "push" in push.ignore_reason
    assert not any(e.routable for e in (ping, edited, bot, push))


def test_missing_headers_or_a_bad_body_are_400() -> None:
    adapter = GitHubAdapter(SECRET)
    request = _request("issues", {})
    no_event = InboundRequest("POST", "x", {"x-github-delivery": "1"}, request.body)
    with pytest.raises(MalformedRequest, match="X-GitHub-Event"):
        adapter.parse(no_event)
    with pytest.raises(MalformedRequest):
        adapter.parse(InboundRequest("POST", "x", dict(request.headers), b"[1]"))
