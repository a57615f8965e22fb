"""`owned_run`: a run the app writes itself, ended whichever way its writer stops.

    with owned_run(log, stream="conv-1", run_id=task_id) as run:
        run.append("Message", {...})

Leaving the block ends the run with `Finish`; an exception ends it with `Error` naming the
exception, which propagates. While the block runs, the run holds a lease in the database,
renewed from a background thread; if the process dies, the lease runs out and a gateway's
`OwnedRunSweeper` ends the run with `Error`. Each end goes through `EventLog.end_run`, so a run
ends once, whoever gets there first, and its lease is released in the same transaction.

A run's events are appended only while this process holds its lease: once the lease was lost
(the process stalled past its expiry and the run was ended or taken over elsewhere), `append`
raises `RunError` instead.

Given a gateway's `run_guards`, the run is held to its `finish_guard` plugins when the block is
left normally, and a veto calls the app's `follow_up` for another turn (`guards.py`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from ..bindings.names import tmux_session_problem
from ..bindings.tmux_sessions import bindings_of
from ..coordination.keepalive import LeaseKeeper
from ..coordination.leases import DEFAULT_LEASE_TTL, Lease, LeaseLost
from ..exceptions import RunConflict, RunError
from ..identity.owners import UNOWNED_WRITES, StreamOwners
from ..identity.tokens import check_user_id
from ..log import Event, EventLog
from ..log.event import ERROR, FINISH, TERMINAL_TYPES
from ..log.transaction import Transaction
from ..settings import check_seconds
from .guards import FollowUp, RunGuards, TurnGuards
from .lease_names import lease_name

logger = logging.getLogger(__name__)

# An exception's text beyond this is cut from the run's Error.
MAX_ERROR_CHARS = 4000

HELD_ELSEWHERE = "run {run_id!r} is already owned by another process"
ALREADY_ENDED = "run {run_id!r} has already ended with {type}"
NOT_OPEN = "run {run_id!r} is not open: append inside `with owned_run(...) as run:`"
OPENED_ONCE = "run {run_id!r} was opened already: an OwnedRun is entered once"
OWNED_BY_ANOTHER = "stream {stream!r} belongs to another user: run {run_id!r} cannot write to it"
OVER = "run {run_id!r} has ended: nothing more can be appended to it"
# The session's heartbeat acts on someone's agent: the gateway must know whose.
TMUX_NEEDS_OWNER = "a run for a tmux session needs its owner: owned_run(..., owner=USER)"
TURN_OVER = (
    "run {run_id!r}: the turn appended its Finish, held back for the finish guards; nothing "
    "more can be appended to it"
)
LEASE_LOST = (
    "run {run_id!r}: this process lost its lease (it was not renewed in time), "
    "and the run was ended or taken over elsewhere"
)


def describe(exc: BaseException) -> str:
    """What an exception says, as Python prints it: ``ValueError: the text``."""
    return "".join(traceback.format_exception_only(exc)).strip()


class OwnedRun:
    """A run of `stream` that this process writes, for ``with owned_run(...) as run:``
    (`owned_run` is this class): it ends with `Finish` when the block ends, with `Error` when
    it raises or when the process dies; see the module docstring.

    :param log: the log the run's events go to.
    :param stream: the conversation the run belongs to.
    :param run_id: the run's id (a new one when None).
    :param lease_ttl: seconds the run's lease lasts unrenewed: after a crash, how long the
        run stays open before a sweeper ends it.
    :param owner: the user the run is written for: made the stream's owner, unless it has
        one, before the first event (the default subscription rule lets the owner read it).
        Without it, a stream that has no owner is read by nobody (a warning says so once).
    :param guards: the finish guards the run is held to (`Gateway.run_guards`): asked when the
        block is left normally, unless none is loaded; then a `Finish` the block appends is
        held back until they pass or give up.
    :param follow_up: called with the guards' prompt, in the block's thread, when they veto: the
        app's next turn of the run. Without it, a veto ends the run with `guard_failed` at once.
    :param tmux_session: the tmux session whose agent the run is for: the stream is bound to
        it when the block starts, and while the run goes on no heartbeat is typed there. It
        needs `owner`, who takes the session if it is free; entering the block raises
        `TmuxSessionTaken` (nothing written) when another user holds it.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        stream: str,
        run_id: str | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        owner: str | None = None,
        guards: RunGuards | None = None,
        follow_up: FollowUp | None = None,
        tmux_session: str | None = None,
    ) -> None:
        run_id = uuid.uuid4().hex if run_id is None else run_id
        if tmux_session is not None:
            problem = tmux_session_problem(tmux_session)
            if problem is not None:
                raise ValueError(problem)
            if owner is None:
                raise ValueError(TMUX_NEEDS_OWNER)
        self.tmux_session = tmux_session
        log.check(stream=stream, type=FINISH, run_id=run_id)  # InvalidEvent, nothing written
        check_seconds("lease_ttl", lease_ttl)
        if owner is not None:
            check_user_id(owner)
        self.owner = owner
        self.log = log
        self.stream = stream
        self.run_id = run_id
        self.ended: Event | None = None
        self._guards = None
        if guards is not None and guards.any:
            self._guards = TurnGuards(
                guards, follow_up, log=log, run_id=run_id, stream=stream, owner=owner
            )
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self._lease = Lease(log, lease_name(stream, run_id), holder, lease_ttl)
        self._entered = False
        self._open = False
        self._lost = False
        self._lock = threading.Lock()  # appends and the renewing thread share the lease
        self._keeper = LeaseKeeper(
            self._lease, f"run {run_id}", logger=logger, on_lost=self._lease_lost, lock=self._lock
        )

    @property
    def lease_ttl(self) -> float:
        return self._lease.ttl

    # --- the block -------------------------------------------------------------------------

    def _check_open_to_us(self) -> None:
        """With the lease held (no sweeper can end the run from here on): the run has not
        ended, and its stream is this run's owner's (or has no owner yet, and now does)."""
        end = self.log.run_end(self.run_id)
        if end is not None:
            raise RunError(ALREADY_ENDED.format(run_id=self.run_id, type=end.type))
        owners = StreamOwners(self.log)
        if self.owner is None:
            UNOWNED_WRITES.check(owners, self.stream)  # read by nobody: say so, once
            return
        owner = owners.declare(self.stream, self.owner)
        if owner != self.owner:  # its events would be read by the stream's owner
            raise RunError(OWNED_BY_ANOTHER.format(stream=self.stream, run_id=self.run_id))

    def __enter__(self) -> OwnedRun:
        if self._entered:
            raise RunError(OPENED_ONCE.format(run_id=self.run_id))
        self._entered = True
        if not self._lease.acquire():
            raise RunConflict(HELD_ELSEWHERE.format(run_id=self.run_id))
        try:
            self._check_open_to_us()
            if self.tmux_session is not None:
                assert self.owner is not None  # checked when made
                bindings_of(self.log).bind(self.stream, self.tmux_session, self.owner)
        except BaseException:  # whatever refused it, or failed, the lease goes back
            self._lease.release()
            raise
        self._open = True
        self._keeper.start_thread(f"gateway-kit-run-{self.run_id}")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._open:
            return
        if exc is None and self.ended is None and self._guards is not None and not self._lost:
            try:  # the lease is still renewed while the guards and follow-ups take their time
                self._guards.settle(self.append, self._end, lambda: self.ended is not None)
            except BaseException as failure:  # a follow-up raised: the run ends with its Error
                self._close()
                self._end_with(failure)
                raise
        self._close()
        if self.ended is not None:
            return
        if exc is None:
            self._end(FINISH, {})
            return
        self._end_with(exc)

    def _close(self) -> None:
        self._open = False
        self._keeper.stop()

    def _end_with(self, exc: BaseException) -> None:
        # The exception is what the caller must hear about: one in ending the run is only
        # logged (the lease runs out, and a sweeper ends the run instead).
        if self.ended is not None:
            return
        try:
            self._end(ERROR, {"error": describe(exc)[:MAX_ERROR_CHARS]})
        except RunError as lost:
            logger.warning("%s", lost)
        except Exception:
            logger.exception("could not end run %s with its error", self.run_id)

    # --- writing ---------------------------------------------------------------------------

    def append(self, type: str, data: Mapping[str, Any] | None = None) -> Event | None:
        """Append one event of the run; a `Finish` or `Error` ends it (and releases the
        lease). `RunError` outside the block, once the run has ended, or once this process
        has lost its lease. A `Finish` of a guarded run is held back (None): the run ends
        after the block, as its guards decide."""
        if not self._open:
            raise RunError(NOT_OPEN.format(run_id=self.run_id))
        if self.ended is not None:
            raise RunError(OVER.format(run_id=self.run_id))
        guards = self._guards
        if guards is not None and guards.turn_ended:
            raise RunError(TURN_OVER.format(run_id=self.run_id))
        if type == FINISH and guards is not None:
            self._check_lease()
            guards.hold(data)
            return None
        if type in TERMINAL_TYPES:
            event = self._end(type, data)
            self._keeper.stop()
            return event
        self._check_lease()
        return self.log.append(self.stream, type, data, run_id=self.run_id)

    def _end(
        self, type: str, data: Mapping[str, Any] | None, before: Sequence[Mapping[str, Any]] = ()
    ) -> Event:
        """Append the events of `before`, the terminal event, and release the lease in one
        transaction."""
        lease = self._lease

        def release(transaction: Transaction, events: list[Event]) -> None:
            if transaction.execute(*lease.release_statement()).rowcount != 1:
                raise LeaseLost

        with self._lock:  # the renewing thread waits, then sees that the run has ended
            try:
                event = self.log.end_run(
                    self.stream, type, data, run_id=self.run_id, before=before, also=release
                )
            except LeaseLost:
                self._lost = True
                raise RunError(LEASE_LOST.format(run_id=self.run_id)) from None
            if event is None:
                event = self._ended_elsewhere()
            lease.token = None
            self.ended = event
            self._keeper.stop(wait=False)
        return event

    def _ended_elsewhere(self) -> Event:
        """The run has a terminal event already: written by the app around this object while
        the lease was ours (fine), or by a sweeper after the lease was lost."""
        if not self._lease.renew():
            self._lost = True
            raise RunError(LEASE_LOST.format(run_id=self.run_id))
        self._lease.release()
        ended = self.log.run_end(self.run_id)
        assert ended is not None
        return ended

    def _check_lease(self) -> None:
        with self._lock:
            # Past the expiry (the renewing thread was held up, the process paused): a
            # sweeper may be ending the run, so renew before writing another event.
            if not self._lost and time.time() >= self._lease.valid_until:
                self._lost = not self._lease.renew()
            if self._lost:
                raise RunError(LEASE_LOST.format(run_id=self.run_id))

    # --- the lease -------------------------------------------------------------------------

    def _lease_lost(self) -> None:
        """The renewing thread found the lease another holder's."""
        self._lost = True
        logger.warning(LEASE_LOST.format(run_id=self.run_id))

    def __repr__(self) -> str:
        return f"OwnedRun(stream={self.stream!r}, run_id={self.run_id!r})"


# `with owned_run(log, stream=...) as run:` reads as what it does; the run it opens is an
# `OwnedRun`, made with the same arguments.
owned_run = OwnedRun
