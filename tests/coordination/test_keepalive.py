"""`LeaseKeeper` keeps a held lease alive while its holder works: past many TTLs, through a
failed renewal, and until the lease turns out to be another holder's, which it then says."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway_kit import EventLog
from gateway_kit.coordination.keepalive import RENEW_FAILED, LeaseKeeper
from gateway_kit.coordination.leases import Lease
from gateway_kit.coordination.tables import leases
from tests.support.waiting import until, wait_until

NAME = "run:r-1"
WHAT = "run 'r-1'"
TTL = 0.3  # renewed every 0.1 s
LOGGER = logging.getLogger("tests.coordination")


def held(log: EventLog, ttl: float = TTL) -> Lease:
    lease = Lease(log, NAME, "process-a", ttl=ttl)
    assert lease.acquire()
    return lease


def test_a_kept_lease_outlives_several_ttls_and_nobody_else_takes_it(log: EventLog) -> None:
    async def main() -> None:
        lease = held(log)
        first_expiry = lease.valid_until
        keeper = LeaseKeeper(lease, WHAT, logger=LOGGER)
        async with keeper.kept():
            await until(lambda: lease.valid_until > first_expiry + 3 * TTL)
            assert not Lease(log, NAME, "process-b").acquire()
        assert not keeper.lost

    asyncio.run(main())


def test_a_keeper_whose_lease_was_taken_over_stops_and_says_so(log: EventLog) -> None:
    lease = held(log)
    told: list[str] = []
    keeper = LeaseKeeper(lease, WHAT, logger=LOGGER, on_lost=lambda: told.append("lost"))
    # Another process took the lease over, as if this one had stalled past the expiry.
    log.tables.write(leases.update().where(leases.c.name == NAME).values(expires_at=0.0))
    assert Lease(log, NAME, "process-b").acquire()
    keeper.start_thread("keeper")
    try:
        wait_until(lambda: keeper.lost)
    finally:
        keeper.stop()
    assert told == ["lost"]
    assert not Lease(log, NAME, "process-a").acquire()  # the keeper took nothing back


def test_a_failed_renewal_is_logged_and_the_next_one_keeps_the_lease(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    lease = held(log)
    renew = lease.renew
    failures = [ConnectionError("the database is away for a moment")]

    def renew_once_failing() -> bool:
        if failures:
            raise failures.pop()
        return renew()

    lease.renew = renew_once_failing  # type: ignore[method-assign]
    keeper = LeaseKeeper(lease, WHAT, logger=LOGGER)
    first_expiry = lease.valid_until
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        keeper.start_thread("keeper")
        try:
            wait_until(lambda: lease.valid_until > first_expiry)
        finally:
            keeper.stop()
    assert not failures and not keeper.lost
    assert [r.getMessage() for r in caplog.records] == [RENEW_FAILED % WHAT]


def test_a_renewal_after_the_expiry_passed_is_noted_as_lapsed_once(log: EventLog) -> None:
    lease = held(log, ttl=1.0)
    keeper = LeaseKeeper(lease, WHAT, logger=LOGGER)
    assert not keeper.due()
    assert keeper.renew_now() and not keeper.lapsed()
    wait_until(lambda: time.time() > lease.valid_until)  # its holder was away past the expiry
    assert keeper.due()
    assert keeper.renew_now()  # nobody took it meanwhile: still this holder's
    assert keeper.lapsed() and not keeper.lapsed()


def test_only_a_keeper_that_retakes_takes_a_swept_lease_back(log: EventLog) -> None:
    lease = held(log)
    log.tables.write(leases.delete().where(leases.c.name == NAME))  # swept away meanwhile
    assert not LeaseKeeper(lease, WHAT, logger=LOGGER).renew_now()
    assert LeaseKeeper(lease, WHAT, logger=LOGGER, retake=True).renew_now()
    assert lease.held
