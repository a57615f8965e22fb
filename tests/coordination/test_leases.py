"""`Lease`: one holder at a time, taken over once it ran out (its token then grows, so the old
holder can tell), and never taken back by a holder that lost it."""

from __future__ import annotations

from gateway_kit import EventLog
from gateway_kit.coordination.leases import Lease

NAME = "pump:session-1"


def test_a_held_lease_is_refused_to_another_holder_and_renewed_by_its_own(log: EventLog) -> None:
    mine = Lease(log, NAME, "process-a")
    theirs = Lease(log, NAME, "process-b")
    assert mine.acquire() and mine.held
    assert not theirs.acquire() and not theirs.held
    assert mine.acquire() and mine.renew()
    assert mine.token == 1  # renewing is not a change of holder


def test_a_lease_that_ran_out_is_taken_over_and_its_old_holder_can_tell(log: EventLog) -> None:
    gone = Lease(log, NAME, "a process now gone", ttl=-1.0)  # ran out as it was taken
    assert gone.acquire() and not gone.held
    taker = Lease(log, NAME, "process-b")
    assert taker.acquire()
    assert taker.token == 2  # every change of holder makes the token grow
    assert not gone.renew() and gone.token is None
    assert not gone.acquire()  # the new holder's lease runs


def test_renewing_never_takes_back_a_lease_lost_meanwhile(log: EventLog) -> None:
    away = Lease(log, NAME, "process-a", ttl=-1.0)
    assert away.acquire()
    other = Lease(log, NAME, "process-b")
    assert other.acquire()
    other.release()  # the name is free again, but what `away` guarded was handled elsewhere
    assert not away.renew()
    assert away.acquire()  # taking it anew is a deliberate act


def test_a_released_lease_is_free_for_another_holder_at_once(log: EventLog) -> None:
    mine = Lease(log, NAME, "process-a")
    assert mine.acquire()
    mine.release()
    assert not mine.held
    assert Lease(log, NAME, "process-b").acquire()


def test_an_old_holder_releasing_leaves_the_new_holders_lease_alone(log: EventLog) -> None:
    old = Lease(log, NAME, "process-a", ttl=-1.0)
    assert old.acquire()
    new = Lease(log, NAME, "process-b")
    assert new.acquire()
    old.release()
    assert not Lease(log, NAME, "process-c").acquire()
    assert new.renew()


def test_leases_of_other_names_do_not_meet(log: EventLog) -> None:
    assert Lease(log, "pump:session-1", "process-a").acquire()
    assert Lease(log, "pump:session-2", "process-b").acquire()
