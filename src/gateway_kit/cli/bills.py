"""``gateway-kit bills``: what was billed for each run, and whether it was delivered."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..log import EventLog
from ..runs.model import Bill
from ..runs.store import RunStore
from .table import print_rows

COLUMNS = ("run", "stream", "status", "input", "output", "total", "cost", "tries", "delivered")


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    bills = commands.add_parser("bills", help="what was billed for each run")
    bills.add_argument(
        "--undelivered", action="store_true", help="only bills bill_run has not taken yet"
    )
    bills.add_argument("--json", action="store_true", help="one bill JSON per line")
    add_db_option(bills)
    bills.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with EventLog(args.db) as log:
        found = RunStore(log).bills(undelivered=args.undelivered)
    if args.json:
        for bill in found:
            print(json.dumps(bill_json(bill), ensure_ascii=False))
        return 0
    print_rows([COLUMNS, *(bill_row(bill) for bill in found)])
    return 0


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
