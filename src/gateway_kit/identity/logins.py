"""`EndedLogins`: cookie logins that were logged out, so that a copy of their cookie is refused.

A Flask session cookie cannot be taken back: whoever kept a copy could still send it after the
user logged out. The gateway notes each ended login (by its credential id, with when it
ended) and refuses from then on a cookie of it signed before that, in every process. Ended
logins are asked about on every cookie request: each process answers from memory
(`CredentialView`) for the logins asked about lately, a bounded number of them
(`LoginMemory`), and asks the database about any other; a client that logs in and out at will
costs the database rows, never a process's memory. A row older than the cookie's maximum age
can no longer matter (every cookie signed before it is refused for its age) and is deleted.
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from ..log import EventLog
from .credentials import CredentialView, credentials_of, next_change
from .tables import revoked_logins


class EndedLogins:
    """:param log: whose database keeps the ended logins.
    :param max_age: seconds a cookie's signature stays valid: ended logins older than that
        are deleted. None keeps them.
    """

    def __init__(self, log: EventLog, *, max_age: float | None = None) -> None:
        self.log = log
        self.view: CredentialView = credentials_of(log)
        if max_age is not None:
            current = self.view.login_max_age
            # Several readers of one log: the longest-lived cookie decides.
            self.view.login_max_age = max_age if current is None else max(current, max_age)

    def end(self, credential_id: str, user_id: str) -> None:
        """Note that the login `credential_id` ended now: its cookies signed until now are
        refused, and whatever they hold open is closed."""
        now = time.time()
        table = revoked_logins
        with self.log.tables.transaction() as conn:
            change = next_change(conn, table.c.change)
            # Ended again (a user whose logins all share one credential logged in anew):
            # the newer end counts.
            updated = conn.execute(
                table.update()
                .where(table.c.credential_id == credential_id)
                .values(revoked_at=sa.func.max(table.c.revoked_at, now), change=change)
                if conn.dialect.name == "sqlite"
                else table.update()
                .where(table.c.credential_id == credential_id)
                .values(revoked_at=sa.func.greatest(table.c.revoked_at, now), change=change)
            ).rowcount
            if not updated:
                conn.execute(
                    table.insert().values(
                        credential_id=credential_id, user_id=user_id, revoked_at=now, change=change
                    )
                )
        self.view.noted_end(credential_id, now)

    def ended(self, credential_id: str, since: float | None = None) -> bool:
        """Whether the login ended (at or after `since`, when given): from memory, or from the
        database for a login memory holds no answer for (`DatabaseUnavailable` when it cannot
        be read). Call it off the event loop."""
        return self.view.login_ended(credential_id, since)

    def prune(self, max_age: float) -> int:
        """Delete ended logins older than `max_age` seconds; returns how many."""
        return self.view.prune_logins(max_age)
