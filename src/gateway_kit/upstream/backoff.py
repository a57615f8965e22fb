"""`Streak`: a pump's connections to goose that failed in a row, and the pause before the next.

A connection that brought nothing new (goose closed it, cut it mid-frame, refused the cursor)
counts as failed, whatever ended it; one that brought new events, or stayed open long enough
to be called stable, ends the streak. The streak's first failure starts the one clock that
`upstream_down_timeout` is measured on, however many reconnections and `/status` checks come
after it.
"""

from __future__ import annotations

import time

from ..log.reconnect import pause_after


class Streak:
    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = cap
        self.count = 0
        self.last_error = ""
        self._since = 0.0

    def failed(self, error: str) -> None:
        if self.count == 0:
            self._since = time.monotonic()
        self.count += 1
        self.last_error = error

    def reset(self) -> None:
        self.count = 0
        self.last_error = ""

    @property
    def elapsed(self) -> float:
        """Seconds since the streak's first failure; 0 when there is none."""
        return time.monotonic() - self._since if self.count else 0.0

    def pause(self) -> float:
        """The pause before the next connection: doubling with each failure, capped, and half
        of it random, so the pumps of every session cut by one goose do not come back at once."""
        return pause_after(self.count, self.base, self.cap, jitter=0.5)
