"""Who holds a tmux session: the first claim takes a free one, its holder keeps it, anyone
else is refused, and one user holds a bounded number of them."""

from __future__ import annotations

import threading

import pytest

from gateway_kit import EventLog, TmuxSessionTaken
from gateway_kit.bindings.claims import TmuxClaims, claims_of


def test_the_first_claim_takes_a_free_session_and_only_its_holder_keeps_it(log: EventLog) -> None:
    claims = claims_of(log)
    claims.claim("agent-1", "alice")
    claims.claim("agent-1", "alice")  # again: kept
    with pytest.raises(TmuxSessionTaken, match="held by another user"):
        claims.claim("agent-1", "bob")
    assert claims.holder("agent-1") == claims.cached("agent-1") == "alice"
    claims.release("agent-1")
    assert claims.holder("agent-1") is None and claims.cached("agent-1") is None
    claims.claim("agent-1", "bob")
    assert claims.holder("agent-1") == "bob"


def test_another_process_learns_of_a_claim_when_it_reads_them_again(
    log: EventLog, log_url: str
) -> None:
    other = EventLog(log_url)
    try:
        there = TmuxClaims(other)
        claims_of(log).claim("agent-1", "alice")
        assert there.cached("agent-1") is None
        there.refresh()
        assert there.cached("agent-1") == "alice"
        with pytest.raises(TmuxSessionTaken):
            there.claim("agent-1", "bob")  # the database says, whatever the cache held
    finally:
        other.close()


def test_one_user_holds_a_bounded_number_of_sessions(log: EventLog) -> None:
    claims = TmuxClaims(log, max_per_user=3)
    for n in range(3):
        claims.claim(f"agent-{n}", "bob")
    with pytest.raises(TmuxSessionTaken, match="holds 3 tmux sessions"):
        claims.claim("agent-3", "bob")
    assert claims.holder("agent-3") is None  # nothing written
    claims.claim("agent-0", "bob")  # one already held is kept
    claims.claim("agent-3", "alice")  # others are not limited by bob's


def test_concurrent_claims_of_one_session_leave_exactly_one_holder(log: EventLog) -> None:
    users = [f"user-{n}" for n in range(8)]
    won: list[str] = []
    start = threading.Barrier(len(users))

    def claim(user: str) -> None:
        claims = TmuxClaims(log)  # each as a process of its own would
        start.wait()
        try:
            claims.claim("agent-1", user)
        except TmuxSessionTaken:
            return
        won.append(user)

    threads = [threading.Thread(target=claim, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert claims_of(log).holder("agent-1") == won[0]
