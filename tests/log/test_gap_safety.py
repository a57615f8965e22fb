"""No reader may ever miss an event, whatever order concurrent writers commit in."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from gateway_kit import EventLog

WRITERS = 4
PER_WRITER = 2500

# Each writer process appends from two threads, so appends also go through group commit.
WRITER_SCRIPT = """
import sys, threading
from gateway_kit import EventLog
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with EventLog(url) as log:
    def run(part):
        for i in range(part, count, 2):
            log.append(f"{name}-{part}", "T", {"i": i})
    threads = [threading.Thread(target=run, args=(p,)) for p in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
"""


def test_tailing_reader_sees_every_seq_exactly_once_in_order(pg_url: str) -> None:
    with EventLog(pg_url) as log:

        async def main() -> list[int]:
            seen: list[int] = []
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", WRITER_SCRIPT, pg_url, f"w{n}", str(PER_WRITER)]
                )
                for n in range(WRITERS)
            ]

            async def read_all() -> None:
                async for event in log.tail(batch=50):
                    seen.append(event.seq)
                    if len(seen) == WRITERS * PER_WRITER:
                        return

            await asyncio.wait_for(read_all(), 240)
            for proc in procs:
                assert await asyncio.to_thread(proc.wait) == 0
            return seen

        seen = asyncio.run(main())
        committed = [e.seq for e in log.read(limit=WRITERS * PER_WRITER + 1)]
    assert len(committed) == WRITERS * PER_WRITER
    assert seen == committed  # every committed seq, once, in order
