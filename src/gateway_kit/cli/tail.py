"""``gateway-kit tail STREAM``: print a stream's events as they arrive, until Ctrl-C, or until
the end of one run (``--until-finish RUN_ID``), which must be known: one that has started,
even if it has written nothing yet (`runs_known`).

Ctrl-C is handled here rather than left to the inherited disposition: a shell starts background
jobs and non-interactive scripts with SIGINT ignored, and a tail started that way must still stop
on it. SIGTERM stops it the same way, after the log is closed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from ..log import Event, EventLog
from ..log.event import check_cursor
from .durable import refuses_in_memory
from .runs_known import stream_of_run
from .unreachable import shown

STOP_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # the shell's 128 + signal number
HEADER = "# {stream} in {db} (epoch {epoch}), after seq {after}"
OTHER_STREAM = "run {run_id!r} belongs to stream {found!r}, not {stream!r}"
ALREADY_ENDED = "# run {run_id} ended at seq {seq} ({type}), at or before --after {after}"
UNKNOWN_RUN = (
    "no run {run_id!r} is known: none was started with that id, and the log holds nothing of it"
)
NOTHING_TO_TAIL = "it starts empty, and no other process can write to it"


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    tail = commands.add_parser("tail", help="print a stream's events as they arrive")
    tail.add_argument("stream", help="the stream (conversation) to follow")
    tail.add_argument("--after", default=0, type=cursor, help="start after this seq (default 0)")
    tail.add_argument(
        "--json", action="store_true", help="one envelope JSON per line; the header to stderr"
    )
    tail.add_argument(
        "--until-finish",
        metavar="RUN_ID",
        help="stop after this run's terminal event (its Finish or Error)",
    )
    add_db_option(tail)
    refuses_in_memory(tail, NOTHING_TO_TAIL)
    tail.set_defaults(run=run)


def cursor(text: str) -> int:
    try:
        return check_cursor(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_event(event: Event) -> str:
    """One line: the event's seq (what ``--after`` takes), time, type, run and data."""
    when = event.created_at.strftime("%H:%M:%S")
    run = f" run={event.run_id}" if event.run_id else ""
    return f"{event.seq:>8} {when} {event.type}{run} {event.data_json}"


def run(args: argparse.Namespace) -> int:
    notes = sys.stderr if args.json else sys.stdout
    with EventLog(args.db) as log:
        # A run that cannot be waited for is said alone, before the header.
        if args.until_finish is not None and (problem := run_problem(log, args)) is not None:
            print(f"gateway-kit tail: {problem[1]}", file=sys.stderr)
            return problem[0]
        header = HEADER.format(
            stream=args.stream, db=shown(args.db), epoch=log.epoch, after=args.after
        )
        print(header, file=notes, flush=True)
        if args.until_finish is not None:
            end = log.run_end(args.until_finish)
            if end is not None and end.seq <= args.after:
                print(
                    ALREADY_ENDED.format(
                        run_id=args.until_finish, seq=end.seq, type=end.type, after=args.after
                    ),
                    file=notes,
                )
                return 0
        return asyncio.run(
            until_stopped(follow(log, args.stream, args.after, args.json, args.until_finish))
        )


def run_problem(log: EventLog, args: argparse.Namespace) -> tuple[int, str] | None:
    """Why ``--until-finish`` cannot wait for its run (with the exit code), or None."""
    found = stream_of_run(log, args.stream, args.until_finish)
    if found is None:
        return 1, UNKNOWN_RUN.format(run_id=args.until_finish)
    if found != args.stream:
        return 2, OTHER_STREAM.format(run_id=args.until_finish, found=found, stream=args.stream)
    return None


async def until_stopped(work: Coroutine[Any, Any, None]) -> int:
    """Run `work` until it ends (0) or a stop signal arrives (128 + its number)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    stopped_by: list[int] = []

    def stop(signum: int) -> None:
        stopped_by.append(signum)
        task.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        await task
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        return STOP_SIGNALS[signal.Signals(stopped_by[0])]
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    return 0


async def follow(
    log: EventLog, stream: str, after: int, as_json: bool, until_finish: str | None
) -> None:
    async for event in log.tail(after=after, stream=stream):
        print(json.dumps(event.envelope(), ensure_ascii=False) if as_json else format_event(event),
              flush=True)  # fmt: skip
        if until_finish is not None and event.run_id == until_finish and event.is_terminal:
            return
