"""Each try of a recovery kind is taken once per run by the database, whichever process plans
it, and read back as the kind and its try (`GET /runs/{id}` shows both)."""

from __future__ import annotations

import uuid

import pytest

from gateway_kit import EventLog
from gateway_kit.exceptions import RecoveryUsed
from gateway_kit.runs.model import AttemptKind, Run, RunStatus
from gateway_kit.runs.store import RunStore


def test_each_try_of_a_kind_is_recorded_once_and_read_back_as_its_kind(log: EventLog) -> None:
    store = RunStore(log)
    first = Run(str(uuid.uuid4()), "conv", "s1", str(uuid.uuid4()), RunStatus.ACTIVE, 1, False,
                "hi", 0.0)  # fmt: skip
    run = store.create(first)

    def retry(kind: str, tried: int) -> Run | None:
        return store.add_attempt(
            run, request_id=str(uuid.uuid4()), session_id="s1", kind=AttemptKind.RECOVERY,
            recovery=kind, recovery_try=tried, reason="UPSTREAM_TRANSIENT",
        )  # fmt: skip

    assert retry("transient_retry", 1) is not None
    assert retry("transient_retry", 2) is not None
    with pytest.raises(RecoveryUsed):
        retry("transient_retry", 2)  # another process planned this try first
    assert retry("visual_fallback", 1) is not None  # a kind of its own budget
    attempts = store.attempts(run.run_id)
    assert [(a.kind, a.recovery, a.recovery_try) for a in attempts] == [
        (AttemptKind.INITIAL, None, None),
        (AttemptKind.RECOVERY, "transient_retry", 1),
        (AttemptKind.RECOVERY, "transient_retry", 2),
        (AttemptKind.RECOVERY, "visual_fallback", 1),
    ]
