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


def _parse(name: str, payload: dict[str, Any], delivery: str = "72d3162e-cc78") -> NexusEvent:
    adapter = GitHubAdapter(SECRET)
    request = _request(name, payload, delivery)
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
    assert event.id.startswith("github:issue_comment.created:") and event.routable
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


COMMENT: dict[str, Any] = {
    "action": "created",
    "issue": {**ISSUE, "id": 444500041, "updated_at": "2019-05-15T15:20:21Z"},
    "comment": {"id": 492700400, "body": "Right!", "updated_at": "2019-05-15T15:20:21Z"},
    "repository": {**REPO, "stargazers_count": 0, "pushed_at": "2019-05-15T15:20:00Z"},
    "sender": USER,
}


def test_a_redelivery_under_a_new_guid_is_the_same_event() -> None:
    first = _parse("issue_comment", COMMENT, delivery="guid-1")
    # Redelivered later (or seen by an organization hook too): a new GUID, and the
    # repository's counters have moved on; the comment is the same.
    moved = {**REPO, "stargazers_count": 5, "pushed_at": "2019-05-16T00:00:00Z"}
    again = _parse("issue_comment", {**COMMENT, "repository": moved}, delivery="guid-2")
    assert again.id == first.id
    assert first.id.startswith("github:issue_comment.created:")


def test_different_events_about_one_comment_keep_different_ids() -> None:
    created = _parse("issue_comment", COMMENT)
    edit = {**COMMENT, "action": "edited"}
    edited = _parse("issue_comment", {**edit, "comment": {**edit["comment"], "updated_at": "x"}})
    edited_again = _parse(
        "issue_comment", {**edit, "comment": {**edit["comment"], "updated_at": "y"}}
    )
    other = _parse("issue_comment", {**COMMENT, "comment": {**COMMENT["comment"], "id": 1}})
    labeled = {"action": "labeled", "issue": COMMENT["issue"], "sender": USER}
    bug = _parse("issues", {**labeled, "label": {"id": 1, "name": "bug"}})
    docs = _parse("issues", {**labeled, "label": {"id": 2, "name": "docs"}})
    ids = [e.id for e in (created, edited, edited_again, other, bug, docs)]
    assert len(set(ids)) == len(ids)


def test_a_payload_naming_nothing_of_its_own_is_keyed_by_its_guid() -> None:
    event = _parse("meta", {"hook_id": 1, "repository": REPO}, delivery="guid-9")
    assert event.id == "github:guid-9"


def test_a_long_delivery_guid_or_event_name_still_fits_the_key() -> None:
    event = _parse("x" * 300, {"action": "created", "comment": {"id": 1}}, delivery="g" * 400)
    bare = _parse("meta", {}, delivery="g" * 400)
    assert len(event.id) <= 255 and len(bare.id) <= 255
    assert bare.id == _parse("meta", {}, delivery="g" * 400).id
