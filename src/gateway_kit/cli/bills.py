"""``gateway-kit bills``: what was billed for each run, and whether it was delivered; with
``--user USER``, what the usage ledger holds of that user's runs (``--since``/``--until``
YYYY-MM-DD keep to those UTC days)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..exceptions import SettingsError
from ..identity.tokens import check_user_id
from ..log import EventLog
from ..runs.model import Bill
from ..runs.store import RunStore
from ..usage import UsageEntry, UsageLedger
from .durable import refuses_in_memory
from .table import print_rows

COLUMNS = ("run", "stream", "status", "input", "output", "total", "cost", "tries", "delivered")
LEDGER_COLUMNS = ("run", "stream", "day", "input", "output", "total", "cost")
BAD_DAY = "--{name} must be a day as YYYY-MM-DD, got {value!r}"
NO_BILLS = "it holds no bill"
UNDELIVERED_AND_USER = (
    "--undelivered lists the billing outbox and --user the usage ledger: use one of them"
)


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    bills = commands.add_parser("bills", help="what was billed for each run")
    bills.add_argument(
        "--undelivered", action="store_true", help="only bills bill_run has not taken yet"
    )
    bills.add_argument("--user", help="what the usage ledger holds of this user's runs")
    bills.add_argument("--since", help="with --user: from this UTC day on (YYYY-MM-DD)")
    bills.add_argument("--until", help="with --user: up to this UTC day (YYYY-MM-DD)")
    bills.add_argument("--json", action="store_true", help="one bill JSON per line")
    add_db_option(bills)
    refuses_in_memory(bills, NO_BILLS)
    bills.set_defaults(run=run)


def day(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        if len(value) != len("YYYY-MM-DD"):
            raise ValueError(value)
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise SettingsError(BAD_DAY.format(name=name, value=value)) from None


def run(args: argparse.Namespace) -> int:
    if args.user is not None or args.since is not None or args.until is not None:
        return run_ledger(args)
    with EventLog(args.db) as log:
        found = RunStore(log).bills(undelivered=args.undelivered)
    if args.json:
        for bill in found:
            print(json.dumps(bill_json(bill), ensure_ascii=False))
        return 0
    print_rows([COLUMNS, *(bill_row(bill) for bill in found)])
    return 0


def run_ledger(args: argparse.Namespace) -> int:
    """The usage ledger's entries of one user, in the order they were billed."""
    if args.user is None:
        raise SettingsError("--since and --until need --user")
    if args.undelivered:
        raise SettingsError(UNDELIVERED_AND_USER)
    user = check_user_id(args.user)
    since, until = day("since", args.since), day("until", args.until)
    with EventLog(args.db) as log:
        entries = UsageLedger(log).all_entries(user, since, until)
        if args.json:
            for entry in entries:
                print(json.dumps(entry.as_json(), ensure_ascii=False))
            return 0
        print_rows([LEDGER_COLUMNS, *(entry_row(entry) for entry in entries)])
    return 0


def entry_row(entry: UsageEntry) -> tuple[str, ...]:
    cost = "-" if entry.cost is None else f"{entry.cost:g}"
    tokens = (entry.input_tokens, entry.output_tokens, entry.total_tokens)
    return (entry.run_id, entry.stream, entry.day, *map(str, tokens), cost)


def bill_json(bill: Bill) -> dict[str, Any]:
    return {
        "run_id": bill.run_id,
        "idempotency_key": bill.idempotency_key,
        "stream": bill.stream,
        "status": bill.status,
        "usage": bill.usage,
        "created_at": bill.created_at,
        "tries": bill.tries,
        "delivered_at": bill.delivered_at,
        "last_error": bill.last_error,
    }


def bill_row(bill: Bill) -> tuple[str, ...]:
    usage = bill.usage
    cost = usage.get("cost")
    if bill.delivered_at is not None:
        delivered = datetime.fromtimestamp(bill.delivered_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    else:
        delivered = "pending" + (f" ({bill.last_error})" if bill.last_error else "")
    return (
        bill.run_id,
        bill.stream,
        bill.status,
        str(usage.get("input_tokens", 0)),
        str(usage.get("output_tokens", 0)),
        str(usage.get("total_tokens", 0)),
        "-" if cost is None else f"{cost:g}",
        str(bill.tries),
        delivered,
    )
