"""A process that owns a run, for tests that kill or pause it mid-run.

    python -m tests.app_runs.owned_run_process DB_URL STREAM RUN_ID LEASE_TTL

Opens the run, appends one event and prints ``ready``; then waits for a line on stdin (a test
kills it there, or pauses and resumes it) and tries to append another event, printing
``appended`` or ``refused: <why>``.
"""

from __future__ import annotations

import sys

from gateway_kit import EventLog, RunError, owned_run

BEFORE = {"text": "before the crash"}
AFTER = {"text": "after the pause"}


def main() -> None:
    db_url, stream, run_id, ttl = sys.argv[1:5]
    with EventLog(db_url) as log:
        try:
            with owned_run(log, stream=stream, run_id=run_id, lease_ttl=float(ttl)) as run:
                run.append("Message", BEFORE)
                print("ready", flush=True)
                sys.stdin.readline()
                run.append("Message", AFTER)
                print("appended", flush=True)
        except RunError as exc:
            print(f"refused: {exc}", flush=True)


if __name__ == "__main__":
    main()
