"""Starting and cancelling runs. A run belongs to the gateway: closing every client does not
cancel it; only an explicit cancel does. One active run per stream, and at most
`LifecycleSettings.max_active_runs_per_user` per user, across processes."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable

from ..bindings.goose_sessions import SessionBinding, SessionIdTaken
from ..exceptions import (
    InvalidCredential,
    InvalidEvent,
    RunConflict,
    RunNotFound,
    SessionBusy,
    UpstreamError,
    UpstreamTimeout,
)
from ..identity.owners import StreamTaken
from ..identity.tokens import check_user_id
from ..log import EventLog
from ..log.event import check_name
from ..settings import DEFAULT_WORKING_DIR
from .async_store import AsyncRunStore
from .events import CANCEL_REQUESTED, RUN_STARTED
from .lifecycle import RunLifecycle
from .model import Attempt, Run, RunStatus
from .ports import Pumps, Upstream
from .store import TOO_MANY_ACTIVE, RunStore, SessionMoved, TooManyActiveRuns

REFUSED_ERROR = "the upstream refused the run: {error}"
NO_RUN = "no run {run_id!r}"
NUL_MESSAGE = "message holds a NUL character"
CLAIM_RACE = "stream {stream!r} changed hands while the run started; try again"
SESSION_RACE = "stream {stream!r} kept moving to other goose sessions while the run started"
# Tries to record a run on the stream's session while another start takes that session's id
# away (a goose that hands out its ids again): each try after the first makes a new session.
BIND_TRIES = 3


def starter_of(user_id: str) -> str:
    """What a run records as its starter: the user id, or, for one the database cannot hold
    as text (as a stream's owner could not be), its SHA-256, so that it is counted all the
    same."""
    try:
        return check_user_id(user_id)
    except InvalidCredential:
        digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()
        return f"sha256:{digest}"


class RunService:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: Upstream,
        pumps: Pumps,
        lifecycle: RunLifecycle,
        working_dir: str = DEFAULT_WORKING_DIR,
    ) -> None:
        self.log = log
        self.store = store
        self.runs = AsyncRunStore(store)
        self.upstream = upstream
        self.pumps = pumps
        # The one the pumps share: a run's end is decided under one per-run lock.
        self.lifecycle = lifecycle
        self.calls = lifecycle.calls
        self.working_dir = working_dir

    async def start(
        self,
        stream: str,
        message: str,
        *,
        admit: Callable[[str], Awaitable[str | None]] | None = None,
        user: str | None = None,
    ) -> Run:
        """Start one agent turn in `stream`; `RunConflict` while another run is active there.
        `user`, given, is who starts it: `TooManyActiveRuns` when that user has as many
        active runs as one may (`LifecycleSettings.max_active_runs_per_user`), before
        anything is written or asked of goose, and again in the transaction that records the
        run, so that processes starting runs at once never pass it together (a start refused
        by that second count leaves the stream's new goose session bound, for its next run).

        Everything the run will write is checked first: a stream name or message the log
        cannot hold raises `InvalidEvent` before a session is bound or a run recorded. Then
        `admit(stream)` runs, the caller's last word (who may start runs there): what it
        raises stops the start before the run writes anything. It may name a user to make
        the stream's owner: claimed in the transaction that records the run, if the stream
        is still free to take then (else `admit` is asked again, and claims nothing).
        """
        run_id = str(uuid.uuid4())
        started = {"run_id": run_id, "message": message}
        self.log.check(stream=stream, type=RUN_STARTED, data=started, run_id=run_id)
        # The run row holds the message as text, which PostgreSQL cannot hold NUL in (the log
        # can: its data is JSON, where NUL is escaped). Refused on every backend alike.
        if "\x00" in message:
            raise InvalidEvent(NUL_MESSAGE)
        max_active = self.lifecycle.settings.max_active_runs_per_user
        starter = None if user is None else starter_of(user)
        if starter is not None:
            active = await self.runs.active_count(starter)
            if active >= max_active:
                raise TooManyActiveRuns(TOO_MANY_ACTIVE.format(user=user, active=active))
        claim_for = await admit(stream) if admit is not None else None
        await self._settle_ended(stream)
        for _ in range(BIND_TRIES):
            binding = await self._binding(stream)
            run = Run(
                run_id=run_id,
                stream=stream,
                session_id=binding.session_id,
                upstream_request_id=str(uuid.uuid4()),  # the first attempt's: goose routes by it
                status=RunStatus.ACTIVE,
                attempt=1,
                cancel_requested=False,
                message=message,
                created_at=time.time(),
                started_by=starter,
            )
            try:
                await self._record(run, claim_for, max_active, admit)
            except SessionMoved:
                continue
            break
        else:
            raise RunConflict(SESSION_RACE.format(stream=stream))
        try:
            await self.log.aappend(stream, RUN_STARTED, started, run_id=run_id)
        except BaseException:
            # A run that never got its first event must not hold the stream for good.
            await self.runs.end(run_id, RunStatus.FAILED)
            raise
        try:
            await self.calls.reply(
                binding.session_id,
                message,
                run.upstream_request_id,
                release=lambda: self._drop_previous(binding.session_id),
            )
        except UpstreamError as exc:
            await self._refused(run, exc)
            if isinstance(exc, UpstreamTimeout):
                self.calls.cancel_soon(run)
            if isinstance(exc, SessionBusy):
                raise RunConflict(str(exc)) from exc
            raise
        self.pumps.ensure(binding.session_id)
        return run

    async def _drop_previous(self, session_id: str) -> None:
        """Ask goose to drop the request of the session's run before this one: it has ended
        for the gateway, yet may still keep the session busy."""
        previous = await self.runs.latest_ended_run(session_id)
        if previous is not None:
            await self.calls.cancel(previous)

    async def _binding(self, stream: str) -> SessionBinding:
        """The goose session serving `stream`, started now if it has none. A session id that
        still serves another stream's active run (goose handed it out again) is an
        `UpstreamError`: goose's answer cannot be used."""
        binding = await self.runs.binding(stream)
        if binding is not None:
            return binding
        session = await self.upstream.start_session(self.working_dir)
        # goose ids of this session come after every event written so far: none of the
        # stream's older events (another session's) is ever sent to it as a cursor, and its
        # approvals are told from those of an earlier session that had the same id.
        newest = await self.log.alatest()
        after = 0 if newest is None else newest.seq
        try:
            return await self.runs.bind(stream, session.id, after)
        except SessionIdTaken as exc:
            raise UpstreamError(str(exc)) from None

    async def _record(
        self,
        run: Run,
        claim_for: str | None,
        max_active: int,
        admit: Callable[[str], Awaitable[str | None]] | None,
    ) -> None:
        """Record `run`, first of all: the database's one-active-run index settles races
        between processes, as the count of its starter's active runs does."""
        try:
            await self.runs.create(run, claim_for, max_active=max_active, bound=True)
        except StreamTaken:
            # Written to, or taken, since `admit` looked: it decides again, on what is there.
            if admit is None or await admit(run.stream) is not None:
                raise RunConflict(CLAIM_RACE.format(stream=run.stream)) from None
            await self.runs.create(run, None, max_active=max_active, bound=True)

    async def _settle_ended(self, stream: str) -> None:
        """`RunConflict` while the stream's run is active; a run whose terminal event is in the
        log has ended, even if the process that appended it has not recorded that yet."""
        active = await self.runs.active_run(stream)
        if active is not None and not await self.lifecycle.settle_ended(active):
            raise RunConflict(f"stream {stream!r} already has an active run")

    async def _refused(self, run: Run, exc: UpstreamError) -> None:
        # The client hears of it in the answer to its request: no recovery is tried.
        await self.lifecycle.end_unstarted(run, REFUSED_ERROR.format(error=exc))

    async def cancel(
        self, run_id: str, *, admit: Callable[[str], Awaitable[None]] | None = None
    ) -> Run:
        """Ask goose to stop the run; it ends when goose's `Finish` for it arrives.
        `admit(stream)`, given, runs first (who may act on the run's stream)."""
        run = await self.get(run_id)
        if admit is not None:
            await admit(run.stream)
        if not run.active or run.cancel_requested:
            return run
        await self.runs.request_cancel(run_id)
        await self.log.aappend(run.stream, CANCEL_REQUESTED, {"run_id": run_id}, run_id=run_id)
        self.lifecycle.backoffs.cancel_noted(run_id)
        await self.upstream.cancel(run.session_id, run.upstream_request_id)
        self.pumps.ensure(run.session_id)
        return await self.runs.get(run_id) or run

    async def get(self, run_id: str) -> Run:
        try:
            check_name("run_id", run_id)
        except InvalidEvent:
            raise RunNotFound(NO_RUN.format(run_id=run_id)) from None
        run = await self.runs.get(run_id)
        if run is None:
            raise RunNotFound(NO_RUN.format(run_id=run_id))
        return run

    async def attempts(self, run_id: str) -> list[Attempt]:
        return await self.runs.attempts(run_id)

    async def startup(self) -> None:
        await self.pumps.start()
        await self.lifecycle.start()

    async def shutdown(self) -> None:
        await self.pumps.stop()
        await self.lifecycle.stop()
        await self.upstream.aclose()
