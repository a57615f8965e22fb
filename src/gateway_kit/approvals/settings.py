"""`ApprovalSettings`: how long approvals wait, and how their answers are delivered."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import DEFAULT_APPROVAL_EXPIRY, check_seconds

# goose gives up on an elicitation after this long, as if declined.
ELICITATION_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """:param expiry: seconds a pending approval waits; then it is denied (`Gateway`'s
        ``approval_expiry``). An elicitation waits at most `elicitation_timeout`, as goose does.
    :param redeliver_after: seconds an answer sent to goose may take to show it arrived (the
        tool's response) before it is sent again; the pause doubles with each sending.
    :param max_redeliver_delay: the longest pause between two sendings.
    :param sweep_interval: how often expiries, ended runs and owed answers are looked at.
    """

    expiry: float = DEFAULT_APPROVAL_EXPIRY
    redeliver_after: float = 5.0
    max_redeliver_delay: float = 60.0
    sweep_interval: float = 1.0
    elicitation_timeout: float = ELICITATION_TIMEOUT

    def __post_init__(self) -> None:
        for name in self.__slots__:
            check_seconds(f"ApprovalSettings.{name}", getattr(self, name))

    def redeliver_delay(self, attempts: int) -> float:
        """The pause after the `attempts`-th sending before the next one."""
        return float(
            min(self.redeliver_after * 2 ** min(max(attempts - 1, 0), 30), self.max_redeliver_delay)
        )
