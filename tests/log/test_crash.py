"""A process killed in the middle of `append_many` leaves all of the batch or none of it."""

from __future__ import annotations

import collections
import functools
import os
import signal
import subprocess
import sys

from gateway_kit import EventLog
from tests.support.waiting import wait_until

BATCH = 200
BATCH_WRITER = """
import sys
from gateway_kit import EventLog
log = EventLog(sys.argv[1])
print("ready", flush=True)
batch_no = 0
while True:
    log.append_many(
        [{"stream": "s", "type": "T",
          "data": {"batch": f"{sys.argv[3]}-{batch_no}", "i": i, "pad": "x" * 500}}
         for i in range(int(sys.argv[2]))]
    )
    batch_no += 1
"""


def has_committed(log: EventLog, run: int, batches: int) -> bool:
    """Whether the writer of `run` has committed `batches` batches (it writes one at a time)."""
    newest = log.latest()
    if newest is None or not newest.data["batch"].startswith(f"{run}-"):
        return False
    return int(newest.data["batch"].split("-")[1]) + 1 >= batches


def test_kill_during_append_many_leaves_whole_batches(log_url: str) -> None:
    with EventLog(log_url) as watching:  # schema in place before the writers race
        for run, batches in enumerate((1, 3, 5)):
            proc = subprocess.Popen(
                [sys.executable, "-c", BATCH_WRITER, log_url, str(BATCH), str(run)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            # Killed as it goes on writing, at whatever point of the next batch it reached.
            wait_until(functools.partial(has_committed, watching, run, batches))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()

    with EventLog(log_url) as log:
        events = []
        after = 0
        while page := log.read(after=after, limit=5000, settled=False):
            events.extend(page)
            after = page[-1].seq
        counts = collections.Counter(e.data["batch"] for e in events)
    assert set(counts.values()) == {BATCH}
    for batch in counts:  # each batch is whole and in its own order
        assert [e.data["i"] for e in events if e.data["batch"] == batch] == list(range(BATCH))
    assert [e.pos for e in events] == list(range(1, len(events) + 1))
