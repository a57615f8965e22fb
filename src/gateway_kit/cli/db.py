"""``gateway-kit db upgrade`` and ``gateway-kit db prune``."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from ..log import EventLog, migrate
from ..log.backend import prunable_runs_sql
from ..log.schema import EVENTS, HEAD_REVISION
from .durable import refuses_in_memory
from .json_output import add_json_option, print_json
from .unreachable import shown

AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
AGE_NAMES = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
# What a prune would delete, and what the log holds: one statement, read before deleting. SQL
# text, since it counts what the log's own prune SQL (`prunable_runs_sql`) picks.
PRUNE_PLAN = sa.text(
    f"SELECT (SELECT COUNT(*) FROM {EVENTS} WHERE run_id IN"
    f" (SELECT run_id FROM ({prunable_runs_sql(':cutoff')}) AS prunable)) AS doomed,"
    f" (SELECT COUNT(DISTINCT run_id) FROM ({prunable_runs_sql(':cutoff')}) AS runs) AS runs,"
    f" (SELECT COUNT(*) FROM {EVENTS}) AS total"
)
WOULD_DELETE = (
    "would delete {doomed} of {total} events: those of {runs} finished more than {age} ago"
)
DELETED = "deleted {deleted} events of runs finished more than {age} ago"
EVERYTHING = (
    "gateway-kit db prune: this deletes every event in the log ({total}, those of {runs} finished "
    "more than {age} ago); nothing was deleted. Run it again with --yes to delete them"
)
UPGRADE_VANISHES = "the tables it makes would vanish with it"
PRUNE_VANISHES = "it starts empty, with nothing to prune"


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    db = commands.add_parser("db", help="manage gateway_kit's tables")
    actions = db.add_subparsers(dest="action", required=True, metavar="ACTION")

    upgrade = actions.add_parser("upgrade", help="create or migrate gateway_kit's tables")
    add_db_option(upgrade)
    add_json_option(upgrade)
    refuses_in_memory(upgrade, UPGRADE_VANISHES)
    upgrade.set_defaults(run=run_upgrade)

    prune = actions.add_parser("prune", help="delete events of runs finished long ago")
    add_db_option(prune)
    prune.add_argument(
        "--older-than", required=True, type=parse_age, metavar="AGE", help="e.g. 30d, 12h, 90m"
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted, delete nothing"
    )
    prune.add_argument(
        "--yes", action="store_true", help="go ahead even when every event would be deleted"
    )
    add_json_option(prune)
    refuses_in_memory(prune, PRUNE_VANISHES)
    prune.set_defaults(run=run_prune)


def parse_age(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 30d, 12h, 90m or 45s")
    return timedelta(seconds=int(match[1]) * AGE_UNITS[match[2]])


def run_upgrade(args: argparse.Namespace) -> int:
    before = migrate.upgrade(args.db)
    database = shown(args.db)
    if args.json:
        upgraded = before != HEAD_REVISION
        print_json({"database": database, "before": before, "revision": HEAD_REVISION,
                    "upgraded": upgraded})  # fmt: skip
    elif before == HEAD_REVISION:
        print(f"{database}: already at revision {HEAD_REVISION}")
    else:
        print(f"{database}: upgraded from {before or 'an empty database'} to {HEAD_REVISION}")
    return 0


def human_age(age: timedelta) -> str:
    """An age as people say it: ``30 days``, ``1 hour 30 minutes``, ``0 seconds``."""
    left = int(age.total_seconds())
    parts = []
    for name, seconds in AGE_NAMES:
        count, left = divmod(left, seconds)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts) or "0 seconds"


def run_prune(args: argparse.Namespace) -> int:
    age = human_age(args.older_than)
    with EventLog(args.db) as log:
        cutoff = time.time() - args.older_than.total_seconds()
        [plan] = log.tables.select(PRUNE_PLAN, {"cutoff": cutoff})
        runs = f"{plan.runs} run{'' if plan.runs == 1 else 's'}"
        counts = {"doomed": plan.doomed, "runs": runs, "total": plan.total, "age": age}
        done = {
            "dry_run": args.dry_run,
            "older_than_seconds": args.older_than.total_seconds(),
            "events": plan.total,
            "runs": plan.runs,
            "would_delete": plan.doomed,
            "deleted": 0,
        }
        if args.dry_run:
            if args.json:
                print_json(done)
            else:
                print(WOULD_DELETE.format(**counts))
            return 0
        if plan.total and plan.doomed == plan.total and not args.yes:
            print(EVERYTHING.format(**counts), file=sys.stderr)
            return 1
        deleted = log.prune(older_than=args.older_than)
    if args.json:
        print_json({**done, "deleted": deleted})
    else:
        print(DELETED.format(deleted=deleted, age=age))
    sys.stdout.flush()
    return 0
