"""Deciding where a client resumes, and when it must be told to start again (a reset).

A cursor from another log (``<epoch>:<seq>`` with a foreign epoch) or beyond this log's head
cannot be trusted: resuming "after" it could silently skip events. Such a client first gets a
reset envelope, then every event from the start of the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..log import EventLog
from .request import Cursor
from .sse import reset_envelope

EPOCH_MISMATCH = "epoch_mismatch"
BEYOND_HEAD = "cursor_beyond_head"


@dataclass(frozen=True, slots=True)
class Resume:
    after: int
    reset: str | None = None
    """The reset envelope JSON to send before the events, when the cursor was not usable."""


async def resume_point(
    log: EventLog,
    cursor: Cursor,
    *,
    known_head: int = 0,
    stream: str | None = None,
    run_id: str | None = None,
    unsettled: bool = True,
) -> Resume:
    """Where to resume for `cursor`; `known_head` is a seq already known to exist (no query).
    `unsettled=False` takes a cursor past the settled head for one beyond it: for a reader that
    shares what it sends from there (a Socket.IO room) and would send it those events again."""
    if cursor.foreign_epoch is None and cursor.after <= known_head:
        return Resume(cursor.after)
    head = await log.alast_seq()
    if cursor.foreign_epoch is not None:
        reason = EPOCH_MISMATCH
    elif cursor.after > head and not (unsettled and await committed(log, cursor.after)):
        reason = BEYOND_HEAD
    else:
        return Resume(cursor.after)
    envelope = reset_envelope(
        stream=stream, run_id=run_id, epoch=log.epoch, head=head, reason=reason
    )
    return Resume(0, envelope)


async def committed(log: EventLog, seq: int) -> bool:
    """Whether the log holds events up to `seq`, settled or not. The settled head of
    PostgreSQL lags a commit while an older transaction runs anywhere on the server; a cursor
    handed out by a writer in that time is this log's, not one to start again from."""
    newest = await log.alatest()
    return newest is not None and seq <= newest.seq
