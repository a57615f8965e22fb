"""`ExecutionSettings`: the timings of execution states and heartbeat decisions."""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import SettingsError
from ..settings import check_seconds
from .request_rows import PROCESS_TTL
from .state import DEFAULT_GRACE, DEFAULT_RESPONSE_TIMEOUT, Timings

# The fallback reads a pane twice, a hold apart (3 s by default), and tmux may be slow.
DEFAULT_FALLBACK_TIMEOUT = 15.0
DEFAULT_RETENTION = 7 * 24 * 3600.0
DEFAULT_PRUNE_INTERVAL = 3600.0


@dataclass(frozen=True, slots=True)
class ExecutionSettings:
    """:param response_timeout: seconds a request may wait for its response: within it the
        session is busy (``WAITING_RESPONSE``), past it stale (``STALED``, a heartbeat may go).
    :param grace: seconds after a response that ended with another reason than ``stop``
        before the session counts as idle.
    :param fallback_timeout: seconds the `heartbeat_fallback` plugins may take in all (then
        the decision is a skip).
    :param process_ttl: seconds after which the open requests of a gateway process that
        stopped renewing its row (it died) count as ended with it; each process renews it
        every third of that.
    :param retention: seconds ended requests and decisions are kept.
    :param prune_interval: seconds between two prunings of what is older.
    :param observe: observe the wrapped app's requests per tmux session (the
        `resolve_tmux_session` hook says whose); False leaves them unobserved, and every
        session's state then comes from its runs alone, or the fallback.
    """

    response_timeout: float = DEFAULT_RESPONSE_TIMEOUT
    grace: float = DEFAULT_GRACE
    fallback_timeout: float = DEFAULT_FALLBACK_TIMEOUT
    process_ttl: float = PROCESS_TTL
    retention: float = DEFAULT_RETENTION
    prune_interval: float = DEFAULT_PRUNE_INTERVAL
    observe: bool = True

    def __post_init__(self) -> None:
        self.timings  # checks response_timeout and grace  # noqa: B018
        for name in ("fallback_timeout", "process_ttl", "retention", "prune_interval"):
            check_seconds(name, getattr(self, name))
        if not isinstance(self.observe, bool):
            raise SettingsError(
                f"ExecutionSettings.observe must be True or False, got {self.observe!r}"
            )

    @property
    def timings(self) -> Timings:
        return Timings(self.response_timeout, self.grace)
