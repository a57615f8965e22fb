"""`LeaseKeeper`: keeps a held `Lease` alive while its holder works.

The lease is renewed every third of its TTL, so a renewal or two may fail (the database away
for a moment) before it runs out: a failed renewal is logged and the next one comes as usual.
A renewal that finds the lease another holder's ends the keeping and says so (`lost`, and the
holder's `on_lost`); a log that was closed ends it quietly. A lease whose expiry passed before it
was renewed is noted (`lapsed`): other processes may have acted on it meanwhile.

The keeping runs as an asyncio task (``async with keeper.kept():``), in a thread of its own
(`start_thread`, `stop`), or, for a holder that already wakes up regularly, by `renew_now`
whenever a renewal is `due`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager

from ..exceptions import LogClosed
from .leases import Lease

# Renewed this many times per TTL: a renewal or two may fail before the lease runs out.
RENEWALS_PER_TTL = 3
RENEW_FAILED = "renewing the lease of %s failed; trying again"


class LeaseKeeper:
    """Renews `lease`, which its holder took, until stopped or lost.

    :param what: what the lease is for, in log messages (``"run 'r-1'"``).
    :param logger: where a failed renewal is logged (the holder's own logger).
    :param retake: renew with `Lease.acquire`, which takes the lease anew once it ran out and
        nobody else took it; else with `Lease.renew`, which never takes a lost lease back.
    :param on_lost: called once the lease turns out to be another holder's.
    :param lock: held around each renewal, when the holder shares the lease with other work.
    """

    def __init__(
        self,
        lease: Lease,
        what: str,
        *,
        logger: logging.Logger,
        retake: bool = False,
        on_lost: Callable[[], None] | None = None,
        lock: AbstractContextManager[object] | None = None,
    ) -> None:
        self.lease = lease
        self.what = what
        self.logger = logger
        self.retake = retake
        self.on_lost = on_lost
        self.lost = False
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self._lapsed = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        return self.lease.ttl / RENEWALS_PER_TTL

    def due(self) -> bool:
        """Whether a renewal's interval has passed since the lease was last renewed."""
        return time.time() >= self.lease.valid_until - self.lease.ttl + self.interval

    def lapsed(self) -> bool:
        """Whether the lease ran out before it was renewed (since this was last asked)."""
        lapsed, self._lapsed = self._lapsed, False
        return lapsed

    def renew_now(self) -> bool:
        """Renew once, whatever the time; False when the lease is another holder's. A failure
        to renew raises."""
        expired = self.lease.valid_until and time.time() >= self.lease.valid_until
        held = self.lease.acquire() if self.retake else self.lease.renew()
        self._lapsed = self._lapsed or bool(expired)
        return held

    def renew(self) -> bool:
        """One renewal of the keeping: False once keeping is over (stopped, lost, or the log
        closed); a renewal that failed is logged and keeping goes on."""
        try:
            with self._lock:
                if self._stopped.is_set():
                    return False
                held = self.renew_now()
        except LogClosed:
            return False
        except Exception:
            # One failure must not end the holder's work: the lease still holds a while.
            self.logger.warning(RENEW_FAILED, self.what, exc_info=True)
            return True
        if not held:
            self.lost = True
            if self.on_lost is not None:
                self.on_lost()
        return held

    # --- in an asyncio task ----------------------------------------------------------------

    async def run(self) -> None:
        """Renew every `interval` until keeping is over."""
        while True:
            await asyncio.sleep(self.interval)
            if not await asyncio.to_thread(self.renew):
                return

    @contextlib.asynccontextmanager
    async def kept(self) -> AsyncIterator[LeaseKeeper]:
        """Keep the lease alive, in a task of the running loop, while the block runs."""
        task = asyncio.create_task(self.run(), name=f"gateway-kit-lease-{self.lease.name}")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- in a thread -----------------------------------------------------------------------

    def start_thread(self, name: str) -> None:
        """Keep the lease alive in a daemon thread until `stop`."""
        self._thread = threading.Thread(target=self._renew_forever, name=name, daemon=True)
        self._thread.start()

    def _renew_forever(self) -> None:
        while not self._stopped.wait(self.interval):
            if not self.renew():
                return

    def stop(self, *, wait: bool = True) -> None:
        """Renew no more; with `wait`, once the thread's renewal under way is done (unless
        called from that thread)."""
        self._stopped.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()
