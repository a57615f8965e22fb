"""``gateway-kit demo``: the example app on embedded SQLite."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..log import EventLog


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    demo = commands.add_parser("demo", help="run the example app on embedded SQLite")
    demo.add_argument("--db", default="sqlite:///gateway-demo.db", help="database URL")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        print(f"gateway_kit demo log: {args.db}")
        print(f"epoch {log.epoch}, {log.last_seq()} events")
        for event in log.read(after=max(0, log.last_seq() - 10)):
            print(f"  {event.seq} {event.stream} {event.type} {event.data_json}")
    return 0
