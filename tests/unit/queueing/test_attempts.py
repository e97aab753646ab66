"""What counts as an attempt (pure): a fenced run gives its claim's count back; a dead
letter keeps its count; out of attempts; the retry's wait."""

from __future__ import annotations

import pytest

from nexus.ledger.enums import QueueStatus
from nexus.queueing.attempts import (
    DEFAULT_MAX_ATTEMPTS,
    gives_back,
    out_of_attempts,
    retry_delay_ms,
)


@pytest.mark.parametrize(
    ("status", "claimed_epoch", "attempts", "expected"),
    [
        (QueueStatus.CLAIMED, 7, 1, True),  # still held by the fenced run: back to the queue
        (QueueStatus.QUEUED, 7, 2, True),  # reclaimed by the run that took over, not yet claimed
        (QueueStatus.CLAIMED, 9, 2, True),  # taken over: the newer run holds it now
        (QueueStatus.DONE, 9, 2, True),  # taken over and answered
        (QueueStatus.QUEUED, 9, 2, True),  # taken over, failed, back for a retry
        (QueueStatus.DEAD, 9, 3, False),  # a dead letter keeps the count it died with
        (QueueStatus.DROPPED, 9, 1, True),  # cancelled since: the count is still corrected
        (QueueStatus.CLAIMED, 6, 1, False),  # not claimed by this run (an older claim)
        (QueueStatus.QUEUED, None, 0, False),  # never claimed
        (QueueStatus.DONE, 7, 0, False),  # never below nothing
    ],
)
def test_a_fenced_run_gives_back_its_claims_count_unless_the_item_died(
    status: QueueStatus, claimed_epoch: int | None, attempts: int, expected: bool
) -> None:
    found = gives_back(
        fenced_epoch=7, status=status, claimed_epoch=claimed_epoch, attempts=attempts
    )
    assert found is expected


def test_the_third_counted_attempt_is_the_last() -> None:
    assert DEFAULT_MAX_ATTEMPTS == 3
    assert [out_of_attempts(n) for n in range(5)] == [False, False, False, True, True]
    assert out_of_attempts(1, max_attempts=1)


def test_a_retry_waits_1_then_5_then_30_seconds() -> None:
    assert [retry_delay_ms(n) for n in range(6)] == [1_000, 1_000, 5_000, 30_000, 30_000, 30_000]
