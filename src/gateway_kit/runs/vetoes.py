"""What finish guards' vetoes write, the same for the runs the gateway drives and those an app
writes itself (`owned_run`): the `FollowUpStarted` event of each follow-up turn and, once the
guards have given up, the `guard_failed` event, a warning in the log, and a `Finish` whose data
says ``"guard_failed": true`` (a client reading only a run's end never sees a plain success).
When the guards give up is `decide`'s rule (`ending.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..hooks.results import GuardFailure, GuardVeto
from .events import GUARD_FAILED

logger = logging.getLogger(__name__)

# The key of a run's Finish data that says its guards gave up.
GUARD_FAILED_FLAG = "guard_failed"
GUARD_FAILED_WARNING = "run %s: finish guards still vetoed after %d follow-up(s): %s"


def any_failed(vetoes: Sequence[GuardVeto]) -> bool:
    """Whether a guard failed among `vetoes`: then no follow-up is asked for."""
    return any(isinstance(veto, GuardFailure) for veto in vetoes)


def follow_up_started(
    attempt: int, reasons: Sequence[str], missing: Sequence[str], prompt: str
) -> dict[str, Any]:
    """The data of the `FollowUpStarted` event of the follow-up turn numbered `attempt`."""
    return {
        "attempt": attempt,
        "reasons": list(reasons),
        "missing": list(missing),
        "prompt": prompt,
    }


def guard_failed_data(
    reasons: Sequence[str], missing: Sequence[str], follow_ups: int
) -> dict[str, Any]:
    """The data of the `guard_failed` event of a run whose guards gave up."""
    return {
        "type": GUARD_FAILED,
        "reasons": list(reasons),
        "missing": list(missing),
        "follow_ups": follow_ups,
    }


def guard_failed_before(
    run_id: str, stream: str, guard_failed: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The events written just before the run's end: its `guard_failed` event, with the data
    `guard_failed`, when its guards gave up (a warning in the log says so too)."""
    if guard_failed is None:
        return []
    reasons = "; ".join(guard_failed["reasons"])
    logger.warning(GUARD_FAILED_WARNING, run_id, guard_failed["follow_ups"], reasons)
    return [{"stream": stream, "type": GUARD_FAILED, "data": dict(guard_failed)}]


def flagged_finish(data: Mapping[str, Any]) -> dict[str, Any]:
    """The data of the `Finish` of a run whose guards gave up: `data`, flagged."""
    return {**data, GUARD_FAILED_FLAG: True}
