"""Closing the log while other threads are using it."""

from __future__ import annotations

import asyncio
import threading

from gateway_kit import EventLog, LogClosed


def read_until_closed(log: EventLog, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            log.read(limit=10)
            log.last_seq()
        except LogClosed:
            return


async def start_watcher(log: EventLog) -> None:
    await log.wait_for_change(log.change_token, 0.05)


def test_closing_under_concurrent_readers_and_a_watcher_is_clean(log_url: str) -> None:
    """Regression: closing a connection under a query in another thread crashed the process.

    Any other error in a reader thread (a closed connection used) fails the test too, through
    pytest's unhandled-thread-exception warning.
    """
    for _ in range(15):
        log = EventLog(log_url)
        log.append("s", "T")
        asyncio.run(start_watcher(log))  # the cross-process watcher thread now runs
        stop = threading.Event()
        threads = [threading.Thread(target=read_until_closed, args=(log, stop)) for _ in range(4)]
        for t in threads:
            t.start()
        log.close()
        stop.set()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
