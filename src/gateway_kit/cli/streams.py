"""``gateway-kit streams``: who owns a stream.

    gateway-kit streams owner STREAM USER [--force] [--json]   # USER reads STREAM from now on

For data written before the app declared owners: a stream that holds events and no owner is
read by nobody, and starting a run never takes it. A stream that another user owns keeps its
owner unless ``--force`` is given: that user loses it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidCredential, InvalidEvent
from ..identity.owners import StreamOwnedByOther, StreamOwners
from ..log import EventLog
from .durable import refuses_in_memory
from .json_output import add_json_option, print_json

SET = "stream {stream!r} is owned by {user!r} (before: {before})"
UNCHANGED = "stream {stream!r} is owned by {user!r} already"
NOT_WRITTEN = " (it holds no event yet)"
FORCE_HINT = "; pass --force to change it"
OWNER_VANISHES = "the owner it records would vanish with it"


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    streams = commands.add_parser("streams", help="who owns a stream")
    actions = streams.add_subparsers(dest="action", required=True, metavar="ACTION")
    owner = actions.add_parser("owner", help="make USER the owner of STREAM")
    owner.add_argument("stream", metavar="STREAM")
    owner.add_argument("user", metavar="USER")
    owner.add_argument(
        "--force", action="store_true", help="also when another user owns it (they lose it)"
    )
    add_json_option(owner)
    add_db_option(owner)
    refuses_in_memory(owner, OWNER_VANISHES)
    owner.set_defaults(run=run_owner)


def run_owner(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        owners = StreamOwners(log)
        try:
            before = owners.set_owner(args.stream, args.user, force=args.force)
        except StreamOwnedByOther as exc:
            print(f"gateway-kit streams owner: {exc}{FORCE_HINT}", file=sys.stderr)
            return 1
        except (InvalidCredential, InvalidEvent) as exc:
            print(f"gateway-kit streams owner: {exc}", file=sys.stderr)
            return 2
        written = owners.written(args.stream)
    if args.json:
        print_json(
            {
                "stream": args.stream,
                "owner": args.user,
                "before": before,
                "changed": before != args.user,
                "written": written,
            }
        )
        return 0
    if before == args.user:
        message = UNCHANGED.format(stream=args.stream, user=args.user)
    else:
        before_text = "none" if before is None else repr(before)
        message = SET.format(stream=args.stream, user=args.user, before=before_text)
    print(message + ("" if written else NOT_WRITTEN))
    return 0
