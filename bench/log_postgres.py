"""Event log on PostgreSQL: gap-safe appends against the unsafe plain sequence, tailed live.

Writer processes append concurrently, one event per call, while a reader process tails the
log ("after the last position seen", in a loop) and records every seq it saw. Once the writers
are done the reader reads on until it has caught up; every committed seq it never saw is missed.

  gateway_kit  EventLog.append: gateway_kit_append() takes an advisory lock inside one statement
  plain        seq bigserial, INSERT ... RETURNING in autocommit, no lock: unsafe, the baseline
  lock-rt      BEGIN; SELECT pg_advisory_xact_lock(); INSERT; COMMIT: a lock across round trips
  horizon      plain writers; the reader only returns rows of transactions older than the
               oldest one in progress (xid8 column, pg_snapshot_xmin), in (xid, seq) order
  lock-xid     a proposal: a per-stream lock held to commit, then a global lock taken only
               around xid and seq assignment and released before the commit, so that seq order
               is xid order; the reader reads below the horizon in seq order, by seq cursor
  horizon-seq  as horizon but by seq cursor, which can miss (only if named in --methods)
  lock-xid-notify  lock-xid plus one NOTIFY per append after its commit (only if named)

gateway_kit also sends a NOTIFY per commit (inside its transaction); plain, horizon and lock-xid
send none.

Two loads: a few threads per writer process (gateway_kit's group commit at work; the other
methods get a connection per thread), and one thread per process. gateway_kit and plain run
every round; the other methods only in the first --extra-rounds rounds. Methods take turns
going first; the table shows medians of per-round ratios against plain in the same round.

    .venv/bin/python bench/log_postgres.py [--db URL]        # about 1.5 minutes on 2 cores
    .venv/bin/python bench/log_postgres.py --rounds 9 --extra-rounds 3 --events 5000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import secrets
import statistics
from dataclasses import dataclass, field

import psycopg
from _pg_methods import GATEWAY_KIT, METHODS, OPT_IN, PLAIN, libpq, with_search_path
from _pg_workers import Outcome, Workers

from gateway_kit import EventLog

DEFAULT_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
GOAL_RATIO = 0.80
EVERY_ROUND = (GATEWAY_KIT, PLAIN)


@dataclass
class Row:
    variant: str
    method: str
    outcomes: list[Outcome] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.method != GATEWAY_KIT:
            return "info"
        clean = all(o.missed == o.duplicates == o.out_of_order == 0 for o in self.outcomes)
        return "PASS" if clean and statistics.median(self.ratios) >= GOAL_RATIO else "MISS"


def print_table(rows: list[Row], writers: int, events: int) -> None:
    header = (
        f"{'load':<20} {'method':<15} {'n':>2} {'events/s':>9} {'vs plain':>9} {'min-max':>10} "
        f"{'missed (max)':>14} {'dup':>4} {'unordered':>9} {'per-tx':>6} {'catch-up':>9}  result"
    )
    print(f"\nPostgreSQL, {writers} writer processes x {events:,} events, one tailing reader")
    print(f"goal for gateway_kit: >= {GOAL_RATIO:.0%} of plain, nothing missed, in order")
    print(header)
    print("-" * len(header))
    for row in rows:
        if not row.outcomes:
            continue
        outcomes = row.outcomes
        missed = [o.missed for o in outcomes]
        print(
            f"{row.variant:<20} {row.method:<15} {len(outcomes):>2} "
            f"{statistics.median(o.rate for o in outcomes):>9,.0f} "
            f"{statistics.median(row.ratios):>9.1%} "
            f"{f'{min(row.ratios):.2f}-{max(row.ratios):.2f}':>10} "
            f"{f'{statistics.median(missed):g} ({max(missed)})':>14} "
            f"{max(o.duplicates for o in outcomes):>4} "
            f"{max(o.out_of_order for o in outcomes):>9} "
            f"{statistics.median(o.per_commit for o in outcomes):>6.1f} "
            f"{statistics.median(o.catch_up for o in outcomes) * 1000:>7.0f}ms  {row.verdict}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--db",
        default=os.environ.get("GATEWAY_KIT_TEST_PG", DEFAULT_DB),
        help="SQLAlchemy URL (default: $GATEWAY_KIT_TEST_PG, else %(default)s)",
    )
    parser.add_argument("--rounds", type=int, default=4, help="(default %(default)s)")
    parser.add_argument(
        "--extra-rounds",
        type=int,
        default=1,
        help="how many of the rounds also run the other methods (default %(default)s)",
    )
    parser.add_argument("--writers", type=int, default=4, help="processes (default %(default)s)")
    parser.add_argument("--events", type=int, default=2500, help="per writer (%(default)s)")
    parser.add_argument(
        "--threads", type=int, default=4, help="per writer in the threaded load (%(default)s)"
    )
    parser.add_argument(
        "--poll", type=float, default=0.002, help="reader's sleep when idle, s (%(default)s)"
    )
    parser.add_argument(
        "--methods",
        default=",".join(m for m in METHODS if m not in OPT_IN),
        help=f"comma-separated, from: {', '.join(METHODS)} (default: all but {', '.join(OPT_IN)})",
    )
    parser.add_argument("--verbose", action="store_true", help="print every run as it ends")
    args = parser.parse_args()
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(args.methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    if PLAIN not in args.methods:
        args.methods.insert(0, PLAIN)  # every ratio is against it
    return args


def main() -> None:
    args = parse_args()
    loads = [(f"{args.threads} threads/process", args.threads), ("1 thread/process", 1)]
    rows = {(load, m): Row(load, m) for load, _ in loads for m in args.methods}
    schema = f"gk_bench_{secrets.token_hex(6)}"
    url = with_search_path(args.db, schema)
    with psycopg.connect(libpq(args.db), autocommit=True) as admin:
        version = admin.execute("SHOW server_version").fetchone()
        admin.execute(f"CREATE SCHEMA {schema}")
        workers = Workers(mp.get_context("spawn"), args.writers)
        try:
            admin.execute(f"SET search_path TO {schema}")
            if GATEWAY_KIT in args.methods:
                EventLog(url).close()  # runs the migrations, outside any timing
            print(
                f"PostgreSQL {version[0] if version else '?'}, schema {schema}, "
                f"{args.rounds} rounds ({args.extra_rounds} with every method)"
            )
            for rnd in range(args.rounds):
                methods = [m for m in args.methods if m in EVERY_ROUND or rnd < args.extra_rounds]
                methods = methods[rnd % len(methods) :] + methods[: rnd % len(methods)]
                for load, threads in loads:
                    outcomes = {}
                    for method in methods:
                        o = workers.run(admin, url, method, threads, args.events, args.poll)
                        outcomes[method] = o
                        if args.verbose:
                            print(
                                f"    {load:<20} {method:<15} {o.rate:>7,.0f}/s "
                                f"missed {o.missed:>4}  per-tx {o.per_commit:.1f}"
                            )
                    for method, o in outcomes.items():
                        rows[load, method].outcomes.append(o)
                        rows[load, method].ratios.append(o.rate / outcomes[PLAIN].rate)
                print(f"  round {rnd + 1}/{args.rounds} done", flush=True)
        finally:
            workers.stop()
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
    print_table(list(rows.values()), args.writers, args.events)


if __name__ == "__main__":
    main()
