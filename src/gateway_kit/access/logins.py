"""`EndedLogins`: cookie logins that were logged out, so that a copy of their cookie is refused.

A Flask session cookie cannot be taken back: whoever kept a copy could still send it after the
user logged out. The gateway notes each ended login (by its credential id) and refuses the
cookie from then on. Ended logins are rare and asked about on every cookie request, so each
process keeps them in memory, reading the table again at most once per `refresh` seconds.
"""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from ..log import EventLog
from .tables import revoked_logins

DEFAULT_REFRESH = 1.0


class EndedLogins:
    def __init__(self, log: EventLog, *, refresh: float = DEFAULT_REFRESH) -> None:
        self.log = log
        self.refresh = refresh
        self._known: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()
        self._all = sa.select(revoked_logins.c.credential_id)

    def end(self, credential_id: str, user_id: str) -> None:
        try:
            with self.log.engine.begin() as conn:
                conn.execute(
                    revoked_logins.insert().values(
                        credential_id=credential_id, user_id=user_id, revoked_at=time.time()
                    )
                )
        except sa.exc.IntegrityError:
            pass  # already ended
        with self._lock:
            self._known = self._known | {credential_id}

    def ended(self, credential_id: str) -> bool:
        now = time.monotonic()
        if now - self._read_at >= self.refresh:
            rows = self.log.select(self._all)
            with self._lock:
                self._known = self._known | {row.credential_id for row in rows}
                self._read_at = now
        return credential_id in self._known
