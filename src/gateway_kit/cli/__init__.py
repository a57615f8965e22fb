"""The ``gateway-kit`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from . import db, demo, serve, tail

DEFAULT_DB = "sqlite:///gateway.db"
DB_HELP = "database URL (default: $GATEWAY_KIT_DB, else sqlite:///gateway.db)"


def default_db() -> str:
    return os.environ.get("GATEWAY_KIT_DB") or DEFAULT_DB


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=DB_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway-kit", description="One durable event log behind every client."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, serve, db, tail):
        module.register(commands, add_db_option)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    if getattr(args, "db", "") is None:
        args.db = default_db()
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
