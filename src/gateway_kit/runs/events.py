"""The event types runs write, and the types goose's own ending events are kept under.

goose's `Finish` and `Error` say how one goose request ended, not the run: they are kept in the
log under types of their own (`UpstreamFinish`, `UpstreamError`, with goose's id and data), so
that no reader takes them for the run's end. The run's own `Finish` or `Error` (`FINISH`,
`ERROR` of `gateway_kit.log.event`, where the log enforces a run's one end) is appended once,
by the lifecycle, after its guards and recoveries.
"""

from __future__ import annotations

RUN_STARTED = "RunStarted"
CANCEL_REQUESTED = "CancelRequested"
UPSTREAM_FINISH = "UpstreamFinish"
UPSTREAM_ERROR = "UpstreamError"
FOLLOW_UP_STARTED = "FollowUpStarted"  # a finish guard vetoed: the run goes on
RECOVERY_STARTED = "RecoveryStarted"  # an upstream error, and a recovery plan for it
GUARD_FAILED = "guard_failed"  # guards still vetoed after the last follow-up
PAYLOAD_DROPPED = "PayloadDropped"  # an upstream event too large for the log
