"""`CredentialView`: the API tokens and ended cookie logins of a log, as each process knows them.

A token is checked against memory, never against the database: a frozen or locked database
delays no request. Ended cookie logins are too many to keep (a client can end thousands a
minute, and each matters for a cookie's lifetime): memory keeps the answers for the
`LOGINS_REMEMBERED` logins asked about lately (`LoginMemory`), and a login it holds no answer for
is asked of the database once (a request of a login first seen by this process, or not seen for
long). One thread per log reads, every `interval` seconds, only the rows changed since its last
read (each change carries a number given in commit order, see `next_change`), so a revocation
written by any process or by the command line reaches every process within one interval.
Whoever holds a credential open (an SSE stream, a socket) is told when it ends (`watch`).

Fails closed: when the view could not be read for longer than `stale_after` seconds (the
database is down), every check raises `DatabaseUnavailable` instead of answering from memory
that may miss a revocation.

One module, though over 300 lines: the refresh thread, the fail-closed staleness and the
watchers all guard the same in-memory state under one lock.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..exceptions import DatabaseUnavailable, LogClosed
from ..log import EventLog
from ..log.per_log import PerLog
from ..settings import DEFAULT_CREDENTIAL_REFRESH_INTERVAL, DEFAULT_CREDENTIAL_STALE_AFTER
from .login_memory import LoginMemory, Unknown
from .tables import api_tokens, revoked_logins

logger = logging.getLogger(__name__)

MAX_BACKOFF = 5.0
STALE = "credentials could not be read from the database for {age:.1f} s; try again shortly"
LOGIN_UNREAD = "whether login {credential_id!r} ended could not be read: {error}"
# Ended-login answers kept per log and process (about 0.2 KB each); read when a view is made.
LOGINS_REMEMBERED = 16_384

Listener = Callable[[], None]


def next_change(conn: sa.Connection, column: sa.Column[Any]) -> int:
    """The change number of a write in `conn`'s transaction: one more than the table's largest.

    Writers of the table take turns (PostgreSQL: a lock that only writers of the table
    conflict with; SQLite: the database's write lock, which every transaction holds), so
    numbers are given in commit order and a reader that saw N saw every change below N.
    """
    if conn.dialect.name == "postgresql":
        # SQL text: SQLAlchemy has no construct for LOCK TABLE.
        conn.exec_driver_sql(f"LOCK TABLE {column.table.name} IN SHARE ROW EXCLUSIVE MODE")
    largest = conn.execute(sa.select(sa.func.max(column))).scalar()
    return int(largest or 0) + 1


@dataclass(frozen=True, slots=True)
class KnownToken:
    token_id: str
    user_id: str
    kind: str
    secret_hash: str
    scopes: frozenset[str]
    revoked: bool


class CredentialView:
    """:param log: whose tables are read.
    :param interval: seconds between reads of what changed.
    :param stale_after: seconds without a successful read after which checks raise
        `DatabaseUnavailable`.
    :param logins_remembered: ended-login answers kept in memory (`LOGINS_REMEMBERED` when
        None), besides those of the logins held open.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        interval: float = DEFAULT_CREDENTIAL_REFRESH_INTERVAL,
        stale_after: float = DEFAULT_CREDENTIAL_STALE_AFTER,
        logins_remembered: int | None = None,
    ) -> None:
        # Weakly: the view lives as long as its log, whose closing (or collection) ends the
        # reading thread.
        self._log = weakref.ref(log)
        self.interval = interval
        self.stale_after = stale_after
        self.login_max_age: float | None = None  # ended logins older than this can go
        self.rows_read = 0  # rows the reads fetched, in all
        self._tokens: dict[str, KnownToken] = {}
        self._watchers: dict[str, dict[int, Listener]] = {}
        # The logins a stream or socket holds open stay known: they are watched.
        remembered = LOGINS_REMEMBERED if logins_remembered is None else logins_remembered
        self._logins = LoginMemory(remembered, pinned=self._watchers)
        self._token_change = -1  # -1: nothing read yet, the whole table is read
        self._login_change = -1  # -1: nothing read yet, the newest change is read
        self._fresh_at: float | None = None  # monotonic start of the last successful read
        self._rounds = 0  # successful reads so far
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._read = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._ids = itertools.count()
        self._prune_due = 0.0
        self._tokens_query = sa.select(api_tokens).where(
            sa.or_(api_tokens.c.change > sa.bindparam("after"), api_tokens.c.change.is_(None))
        )
        self._newest_login_change = sa.select(
            sa.func.coalesce(sa.func.max(revoked_logins.c.change), 0).label("change")
        )
        self._login_row = sa.select(revoked_logins.c.revoked_at).where(
            revoked_logins.c.credential_id == sa.bindparam("credential_id")
        )
        self._tokens_since = sa.select(api_tokens).where(
            api_tokens.c.change > sa.bindparam("after")
        )
        self._logins_since = sa.select(revoked_logins).where(
            revoked_logins.c.change > sa.bindparam("after")
        )

    @property
    def log(self) -> EventLog:
        log = self._log()
        if log is None:
            raise LogClosed("the log of these credentials is gone")
        return log

    def configure(self, *, interval: float, stale_after: float) -> None:
        self.interval = interval
        self.stale_after = stale_after

    # --- checks (memory only) ---------------------------------------------------------------

    def token(self, token_id: str) -> KnownToken | None:
        """The token `token_id` as last read (revoked ones included), or None; a token made
        since the last read is waited for, a read's time at most."""
        self._check_fresh()
        found = self._tokens.get(token_id)
        if found is None:
            self._await_read()
            found = self._tokens.get(token_id)
        return found

    def login_ended(self, credential_id: str, since: float | None = None) -> bool:
        """Whether the cookie login `credential_id` ended: at all (`since` None), or at or
        after `since` (a cookie signed after its login last ended is a new login). From
        memory, or else from the database (`DatabaseUnavailable` when it cannot be read)."""
        self._check_fresh()
        with self._lock:
            ended_at = self._logins.known(credential_id)
            if isinstance(ended_at, Unknown):
                self._logins.asking(credential_id)
        if isinstance(ended_at, Unknown):
            ended_at = self._ask_login(credential_id)
        return ended_at is not None and (since is None or ended_at >= since)

    def _ask_login(self, credential_id: str) -> float | None:
        """When the login `credential_id` last ended, as its row says, now kept in memory."""
        try:
            rows = self.log.tables.select(self._login_row, {"credential_id": credential_id})
        except sa.exc.DBAPIError as exc:
            with self._lock:
                self._logins.gave_up(credential_id)
            error = LOGIN_UNREAD.format(credential_id=credential_id, error=exc.orig)
            raise DatabaseUnavailable(error) from exc
        except BaseException:
            with self._lock:
                self._logins.gave_up(credential_id)
            raise
        with self._lock:
            return self._logins.answered(credential_id, rows[0].revoked_at if rows else None)

    @property
    def logins_held(self) -> int:
        """How many ended-login answers memory holds (`LOGINS_REMEMBERED`, and the watched)."""
        with self._lock:
            return len(self._logins)

    def token_live(self, token_id: str) -> bool:
        self._check_fresh()
        found = self._tokens.get(token_id)
        return found is not None and not found.revoked

    def ended_in_memory(self, credential_id: str, since: float) -> bool:
        """Whether memory says `credential_id` (a token or a cookie login) ended at or after
        `since` (a token: at all); never waits, never raises."""
        token = self._tokens.get(credential_id)
        if token is not None and token.revoked:
            return True
        with self._lock:
            ended_at = self._logins.peek(credential_id)
        return not isinstance(ended_at, Unknown) and ended_at is not None and ended_at >= since

    # --- news of this process's own writes ----------------------------------------------------

    def noted_token(self, token: KnownToken) -> None:
        with self._lock:
            self._tokens[token.token_id] = token
        if token.revoked:
            self._tell(token.token_id)

    def noted_end(self, credential_id: str, ended_at: float) -> None:
        with self._lock:
            self._logins.noted(credential_id, ended_at)
        self._tell(credential_id)

    # --- holders of an open credential ------------------------------------------------------

    def watch(self, credential_id: str, listener: Listener) -> Callable[[], None]:
        """Call `listener` (from any thread) when `credential_id` is revoked or its login ends
        from now on; returns what stops watching."""
        key = next(self._ids)
        with self._lock:
            self._watchers.setdefault(credential_id, {})[key] = listener
        self.start()

        def unwatch() -> None:
            with self._lock:
                listeners = self._watchers.get(credential_id)
                if listeners is not None:
                    listeners.pop(key, None)
                    if not listeners:
                        del self._watchers[credential_id]

        return unwatch

    def _tell(self, credential_id: str) -> None:
        with self._lock:
            listeners = list(self._watchers.get(credential_id, {}).values())
        for listener in listeners:
            try:
                listener()
            except Exception:
                logger.exception("a listener of an ended credential failed")

    # --- reading ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the reading thread, unless it runs already."""
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._forever, name="gateway-kit-credentials", daemon=True
                )
                self._thread.start()

    def refresh(self) -> int:
        """Read what changed since the last read; returns how many rows were fetched."""
        started = time.monotonic()
        first = self._token_change < 0
        tokens = self.log.tables.select(
            self._tokens_query if first else self._tokens_since, {"after": self._token_change}
        )
        newest: int | None = None
        logins: list[Any] = []
        if self._login_change < 0:
            # Not the rows: a login memory holds no answer for is asked of the database.
            newest = int(self.log.tables.select(self._newest_login_change)[0].change)
        else:
            logins = self.log.tables.select(self._logins_since, {"after": self._login_change})
        ended: list[str] = []
        with self._lock:
            for row in tokens:
                token = _known(row)
                before = self._tokens.get(token.token_id)
                if token.revoked and (before is None or not before.revoked) and not first:
                    ended.append(token.token_id)
                self._tokens[token.token_id] = token
                self._token_change = max(self._token_change, row.change or 0)
            if newest is not None:
                self._login_change = newest
            for row in logins:
                before_at = self._logins.changed(row.credential_id, row.revoked_at)
                if (
                    isinstance(before_at, Unknown)
                    or before_at is None
                    or row.revoked_at > before_at
                ):
                    ended.append(row.credential_id)  # told to its watchers, if it has any
                self._login_change = max(self._login_change, row.change or 0)
            self._token_change = max(self._token_change, 0)
            self._fresh_at = started
            self._rounds += 1
            self._read.notify_all()
        for credential_id in ended:
            self._tell(credential_id)
        fetched = len(tokens) + len(logins)
        self.rows_read += fetched
        return fetched

    def _forever(self) -> None:
        delay = self.interval
        while True:
            try:
                self.refresh()
                self._maybe_prune()
                delay = self.interval
            except LogClosed:
                return
            except Exception:
                logger.exception("reading credentials failed; trying again in %g s", delay)
                delay = min(delay * 2, MAX_BACKOFF)
            self._wake.wait(delay)
            self._wake.clear()

    def _maybe_prune(self) -> None:
        max_age = self.login_max_age
        now = time.monotonic()
        if max_age is None or now < self._prune_due:
            return
        self._prune_due = now + min(max_age, PRUNE_EVERY)
        self.prune_logins(max_age)

    def prune_logins(self, max_age: float) -> int:
        """Forget ended logins older than `max_age` seconds (their cookies are refused for
        their age by then); returns how many rows were deleted."""
        cutoff = time.time() - max_age
        deleted = self.log.tables.write(PRUNE_LOGINS, {"cutoff": cutoff}).rowcount
        with self._lock:
            self._logins.forget_before(cutoff)
        return int(deleted or 0)

    def _check_fresh(self) -> None:
        now = time.monotonic()
        self.start()
        fresh_at = self._fresh_at
        if fresh_at is None or now - fresh_at > self.stale_after:
            self._await_read()  # the first read, or reading again after a pause
            fresh_at = self._fresh_at
        if fresh_at is None or time.monotonic() - fresh_at > self.stale_after:
            age = self.stale_after if fresh_at is None else time.monotonic() - fresh_at
            raise DatabaseUnavailable(STALE.format(age=age))

    def _await_read(self) -> None:
        """Wait (a read's time at most) for a read that starts from now."""
        with self._lock:
            wanted = self._rounds + 2 if self._fresh_at is not None else 1
            self._wake.set()
            self._read.wait_for(lambda: self._rounds >= wanted, timeout=self.interval * 4)


PRUNE_LOGINS = revoked_logins.delete().where(revoked_logins.c.revoked_at < sa.bindparam("cutoff"))
PRUNE_EVERY = 600.0  # seconds between prunes of ended logins, at most

_VIEWS = PerLog(CredentialView)


def credentials_of(log: EventLog) -> CredentialView:
    """The one view of `log`'s credentials in this process."""
    return _VIEWS(log)


def _known(row: Any) -> KnownToken:
    return KnownToken(
        token_id=row.token_id,
        user_id=row.user_id,
        kind=row.kind,
        secret_hash=row.secret_hash,
        scopes=frozenset(json.loads(row.scopes)),
        revoked=row.revoked_at is not None,
    )
