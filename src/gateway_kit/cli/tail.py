"""``gateway-kit tail STREAM``: print a stream's events as they arrive, until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from ..log import Event, EventLog
from ..log.event import check_cursor


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    tail = commands.add_parser("tail", help="print a stream's events as they arrive")
    tail.add_argument("stream", help="the stream (conversation) to follow")
    tail.add_argument("--after", default=0, type=cursor, help="start after this seq (default 0)")
    tail.add_argument("--json", action="store_true", help="one envelope JSON per line")
    add_db_option(tail)
    tail.set_defaults(run=run)


def cursor(text: str) -> int:
    try:
        return check_cursor(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_event(event: Event) -> str:
    when = event.created_at.strftime("%H:%M:%S")
    run = f" run={event.run_id}" if event.run_id else ""
    return f"{event.seq:>8} {when} #{event.pos} {event.type}{run} {event.data_json}"


def run(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        print(
            f"# {args.stream} in {args.db} (epoch {log.epoch}), after seq {args.after}", flush=True
        )
        asyncio.run(follow(log, args.stream, args.after, as_json=args.json))
    return 0


async def follow(log: EventLog, stream: str, after: int, *, as_json: bool) -> None:
    async for event in log.tail(after=after, stream=stream):
        print(json.dumps(event.envelope(), ensure_ascii=False) if as_json else format_event(event),
              flush=True)  # fmt: skip
