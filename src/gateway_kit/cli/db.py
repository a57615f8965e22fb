"""``gateway-kit db upgrade`` and ``gateway-kit db prune``."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..log import EventLog, migrate
from ..log.schema import HEAD_REVISION

AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    db = commands.add_parser("db", help="manage gateway_kit's tables")
    actions = db.add_subparsers(dest="action", required=True, metavar="ACTION")

    upgrade = actions.add_parser("upgrade", help="create or migrate gateway_kit's tables")
    add_db_option(upgrade)
    upgrade.set_defaults(run=run_upgrade)

    prune = actions.add_parser("prune", help="delete events of runs finished long ago")
    add_db_option(prune)
    prune.add_argument(
        "--older-than", required=True, type=parse_age, metavar="AGE", help="e.g. 30d, 12h, 90m"
    )
    prune.set_defaults(run=run_prune)


def parse_age(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 30d, 12h, 90m or 45s")
    return timedelta(seconds=int(match[1]) * AGE_UNITS[match[2]])


def run_upgrade(args: argparse.Namespace) -> int:
    before = migrate.upgrade(args.db)
    if before == HEAD_REVISION:
        print(f"{args.db}: already at revision {HEAD_REVISION}")
    else:
        print(f"{args.db}: upgraded from {before or 'an empty database'} to {HEAD_REVISION}")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        deleted = log.prune(older_than=args.older_than)
    age = args.older_than.total_seconds()
    print(f"deleted {deleted} events of runs finished more than {age:g} seconds ago")
    sys.stdout.flush()
    return 0
