"""The cursor translator: what the pump may send goose as `Last-Event-ID`.

goose cannot tell a foreign id from its own: a gateway seq sent as `Last-Event-ID` replays from
the wrong point, replays nothing, or closes with "Client too far behind", and the client never
sees `Finish`. So:

1. a gateway cursor (seq) only ever reads the log; it is never sent to goose;
2. the header is the newest goose id persisted in the log for this session *and this goosed
   lifetime* (`lifetime_start_seq`: goose's ids restart at 1 when goosed does);
3. when there is none, the header is omitted: goose replays its buffer, and what the log already
   holds is recognised (`is_duplicate`) and not appended twice;
4. when the log already ends the session's latest run (the run's own `Finish` or `Error`, which
   the lifecycle appends; goose's are kept as `UpstreamFinish`/`UpstreamError`), goose is not
   contacted at all;
5. the newest id is searched over the whole session, so a previous round's `Finish` neither
   truncates the choice nor makes a new round look finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...bindings.goose_sessions import SessionBinding
from ...log import Event, EventLog
from ...runs.model import Run
from ..appends import same_event


@dataclass(frozen=True, slots=True)
class ResumePlan:
    connect: bool
    last_event_id: int | None  # None: omit the header
    newest_persisted: int | None  # newest goose id of this lifetime in the log


def goose_id(event: Event | None) -> int | None:
    if event is None or event.upstream_event_id is None:
        return None
    try:
        return int(event.upstream_event_id)
    except ValueError:
        return None


def plan_resume(log: EventLog, binding: SessionBinding, latest_run: Run | None) -> ResumePlan:
    """What to send goose, from the log (blocking: call it off the event loop)."""
    newest = goose_id(
        log.latest(binding.stream, after=binding.lifetime_start_seq, upstream_only=True)
    )
    if latest_run is None or log.run_end(latest_run.run_id) is not None:
        return ResumePlan(connect=False, last_event_id=newest, newest_persisted=newest)
    return ResumePlan(connect=True, last_event_id=newest, newest_persisted=newest)


async def goose_id_at(log: EventLog, binding: SessionBinding, cursor: int) -> int | None:
    """The goose id that corresponds to a gateway cursor: the newest one persisted at or before
    it in this goosed lifetime, or None when the header must be omitted."""
    if cursor <= binding.lifetime_start_seq:
        return None
    event = await log.alatest(
        binding.stream, after=binding.lifetime_start_seq, upto=cursor, upstream_only=True
    )
    return goose_id(event)


async def is_duplicate(
    log: EventLog, binding: SessionBinding, frame_id: int, data: dict[str, object]
) -> bool:
    """On a header-less replay: is this frame the very event the log holds under its id?

    Compared by content, not id alone: after a goosed restart the same small ids name new events.
    """
    event = await log.alatest(
        binding.stream, after=binding.lifetime_start_seq, upstream_event_id=str(frame_id)
    )
    return event is not None and same_event(event, data)
