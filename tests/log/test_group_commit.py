"""Group commit on its own: which appends share a transaction, and who hears of a failure.

The commit function here records each transaction and can be held open, so that appends are
known to arrive while one commits. Where a test is about lingering, `LINGER_SECONDS` is
raised to far longer than the test may take: a leader left waiting for an arrival that already
came would show as a thread that does not finish.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator

import pytest

from gateway_kit.exceptions import DatabaseUnavailable
from gateway_kit.log import group_commit
from gateway_kit.log.group_commit import GroupCommit
from tests.support.waiting import wait_until

LONG_LINGER = 30.0
JOIN_TIMEOUT = 10.0


class HeldCommit:
    """Records each transaction's items; `hold()` keeps the next one open until `release()`."""

    def __init__(self) -> None:
        self.transactions: list[list[str]] = []
        self.entered = threading.Event()
        self._open = threading.Event()
        self._open.set()

    def hold(self) -> None:
        self.entered.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, items: list[str]) -> list[str]:
        self.transactions.append(list(items))
        self.entered.set()
        assert self._open.wait(JOIN_TIMEOUT)
        if "bad" in items:
            raise ValueError("a bad item")
        if "lost" in items:
            raise DatabaseUnavailable("the connection was lost during the commit")
        return [item.upper() for item in items]


class Submitter(threading.Thread):
    """Submits each of `items` alone, one after another; keeps what each submit gave back.
    Before each submit but the first, waits until `before_next()` is true."""

    def __init__(
        self,
        group: GroupCommit[str, str],
        *items: str,
        before_next: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(daemon=True)
        self.group, self.items, self.before_next = group, items, before_next
        self.outcomes: list[list[str] | BaseException] = []

    def run(self) -> None:
        for n, item in enumerate(self.items):
            try:
                if n:
                    wait_until(self.before_next)
                self.outcomes.append(self.group.submit([item]))
            except BaseException as exc:  # kept, even an interruption, for the test to look at
                self.outcomes.append(exc)

    def finish(self) -> None:
        self.join(JOIN_TIMEOUT)
        assert not self.is_alive(), "a submit is still waiting"


@pytest.fixture
def long_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_commit, "LINGER_SECONDS", LONG_LINGER)


@pytest.fixture
def commit() -> Iterator[HeldCommit]:
    held = HeldCommit()
    yield held
    held.release()  # never leave a thread of a failed test waiting


def start_during_commit(
    group: GroupCommit[str, str], commit: HeldCommit, first: Submitter, *later: Submitter
) -> None:
    """Start `first`, hold its transaction open, and queue `later` behind it."""
    commit.hold()
    first.start()
    assert commit.entered.wait(JOIN_TIMEOUT)
    for submitter in later:
        submitter.start()
    wait_until(lambda: group.waiting == len(later))


def release_and_finish(commit: HeldCommit, *submitters: Submitter) -> None:
    commit.release()
    for submitter in submitters:
        submitter.finish()


def test_appends_arriving_during_a_commit_share_the_next_transaction(
    commit: HeldCommit,
) -> None:
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    first = Submitter(group, "a")
    later = [Submitter(group, f"b{i}") for i in range(5)]
    start_during_commit(group, commit, first, *later)
    release_and_finish(commit, first, *later)
    assert commit.transactions[0] == ["a"]
    assert sorted(commit.transactions[1]) == [f"b{i}" for i in range(5)]
    assert len(commit.transactions) == 2
    assert first.outcomes == [["A"]]
    for i, submitter in enumerate(later):
        assert submitter.outcomes == [[f"B{i}"]]


def test_a_failed_transaction_is_retried_one_append_at_a_time(commit: HeldCommit) -> None:
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    first = Submitter(group, "a")
    good, bad, other = Submitter(group, "x"), Submitter(group, "bad"), Submitter(group, "y")
    start_during_commit(group, commit, first, good, bad, other)
    release_and_finish(commit, first, good, bad, other)
    assert good.outcomes == [["X"]]
    assert other.outcomes == [["Y"]]
    [error] = bad.outcomes
    assert isinstance(error, ValueError)
    shared = commit.transactions[1]
    assert sorted(shared) == ["bad", "x", "y"]
    assert commit.transactions[2:] == [[item] for item in shared]  # each alone, in order


def test_a_transaction_whose_connection_was_lost_is_never_made_again(
    commit: HeldCommit,
) -> None:
    """It may have committed before the connection went: made again, alone or together, its
    appends could be written twice. Every append of it hears that the database is gone."""
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    first = Submitter(group, "a")
    later = [Submitter(group, "x"), Submitter(group, "lost"), Submitter(group, "y")]
    start_during_commit(group, commit, first, *later)
    release_and_finish(commit, first, *later)
    assert len(commit.transactions) == 2  # the first, and the shared one: none made again
    for submitter in later:
        [error] = submitter.outcomes
        assert isinstance(error, DatabaseUnavailable)


class Interrupted(BaseException):
    """Stands for KeyboardInterrupt or SystemExit arriving inside a commit."""


def test_an_interrupted_retry_ends_every_append_of_the_batch(commit: HeldCommit) -> None:
    def interrupted_alone(items: list[str]) -> list[str]:
        if items == ["x"]:  # x's retry, after the shared transaction failed
            raise Interrupted
        return commit(items)

    group: GroupCommit[str, str] = GroupCommit(interrupted_alone, threading.Lock())
    first = Submitter(group, "a")
    later = [Submitter(group, item) for item in ("x", "bad", "y")]
    start_during_commit(group, commit, first, *later)
    release_and_finish(commit, first, *later)
    # Each learns of the interruption: none is left waiting, none told that its append was
    # committed.
    for submitter in later:
        [outcome] = submitter.outcomes
        assert isinstance(outcome, Interrupted)
    after = Submitter(group, "z")  # and the next append finds the group working
    after.start()
    after.finish()
    assert after.outcomes == [["Z"]]


@pytest.fixture
def interrupt_main_thread() -> Iterator[Callable[[], None]]:
    """A function that interrupts the main thread (this test's), wherever it waits, with
    `Interrupted`, as Ctrl-C would with KeyboardInterrupt."""

    def handler(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, handler)
    main = threading.main_thread().ident
    assert main is not None
    try:
        yield lambda: signal.pthread_kill(main, signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_an_append_interrupted_while_it_waits_leaves_the_queue(
    commit: HeldCommit, interrupt_main_thread: Callable[[], None]
) -> None:
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    first = Submitter(group, "a")
    commit.hold()
    first.start()
    assert commit.entered.wait(JOIN_TIMEOUT)

    def interrupt_once_queued() -> None:
        wait_until(lambda: group.waiting == 1)
        interrupt_main_thread()

    helper = in_background(interrupt_once_queued)
    with pytest.raises(Interrupted):
        group.submit(["m"])  # waits behind "a" until interrupted
    helper.join(JOIN_TIMEOUT)
    release_and_finish(commit, first)
    after = Submitter(group, "z")  # someone still leads
    after.start()
    after.finish()
    assert after.outcomes == [["Z"]]
    assert commit.transactions == [["a"], ["z"]]  # "m" was never committed


@pytest.mark.usefixtures("long_linger")
def test_a_leader_interrupted_while_it_lingers_hands_the_lead_on(
    commit: HeldCommit, interrupt_main_thread: Callable[[], None]
) -> None:
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    first = Submitter(group, "a")
    second = Submitter(group, "b")
    commit.hold()
    first.start()
    assert commit.entered.wait(JOIN_TIMEOUT)

    def queue_b_then_interrupt_the_lingering_leader() -> None:
        wait_until(lambda: group.waiting == 1)  # "m", first in line: it leads next
        second.start()
        wait_until(lambda: group.waiting == 2)
        commit.release()  # "a" commits; "m" leads, and lingers for a third appender
        wait_until(lambda: group.lingering)
        # "b", leading next, still expects three appenders: let it wait only briefly.
        group_commit.LINGER_SECONDS = 0.001
        interrupt_main_thread()

    helper = in_background(queue_b_then_interrupt_the_lingering_leader)
    with pytest.raises(Interrupted):
        group.submit(["m"])
    helper.join(JOIN_TIMEOUT)
    first.finish()
    second.finish()  # "b" led instead
    assert second.outcomes == [["B"]]
    assert commit.transactions == [["a"], ["b"]]


@pytest.mark.usefixtures("long_linger")
def test_a_leader_waits_for_the_appender_it_expects_and_no_longer(commit: HeldCommit) -> None:
    """Four appenders were seen at once: the next leader waits until the fourth is queued
    again, and starts as soon as it is, not when the linger time runs out."""
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    # Back with its next append after its commit, once the next leader is waiting for it.
    first = Submitter(group, "a1", "a2", before_next=lambda: group.lingering)
    later = [Submitter(group, f"b{i}") for i in range(3)]
    start_during_commit(group, commit, first, *later)
    release_and_finish(commit, first, *later)
    assert commit.transactions[0] == ["a1"]
    assert sorted(commit.transactions[1]) == ["a2", "b0", "b1", "b2"]
    assert first.outcomes == [["A1"], ["A2"]]


@pytest.mark.usefixtures("long_linger")
def test_a_lone_appender_never_lingers(commit: HeldCommit) -> None:
    group: GroupCommit[str, str] = GroupCommit(commit, threading.Lock())
    alone = Submitter(group, *(f"e{i}" for i in range(50)))
    alone.start()
    alone.finish()
    assert commit.transactions == [[f"e{i}"] for i in range(50)]
