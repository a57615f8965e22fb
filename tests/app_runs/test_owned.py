"""`owned_run`: a run the app writes itself ends with Finish, with Error, or, when its process
dies, with the sweeper's Error: once, on every backend."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from gateway_kit import (
    EventLog,
    InvalidEvent,
    OwnedRunSweeper,
    RunConflict,
    RunError,
    owned_run,
)
from gateway_kit.app_runs import owned as owned_module
from gateway_kit.app_runs import sweeper as sweeper_module
from gateway_kit.coordination import leases as lease_module
from gateway_kit.identity.owners import StreamOwners
from tests.support.owned_runs import STREAM, lease_count, lease_of, types
from tests.support.waiting import wait_until

from .owned_run_process import AFTER, BEFORE

ROOT = Path(__file__).resolve().parents[2]
TTL = 1.0  # a killed writer's run is swept a second after its last renewal
PROCESS_TIMEOUT = 30.0


# --- ending in the process ------------------------------------------------------------------


def test_leaving_the_block_ends_the_run_with_finish(log: EventLog) -> None:
    with owned_run(log, stream=STREAM, run_id="r-1") as run:
        assert lease_of(log, "r-1") is not None
        run.append("Message", {"text": "hello"})
        assert log.run_end("r-1") is None
    end = log.run_end("r-1")
    assert end is not None and end.type == "Finish" and end.stream == STREAM
    assert run.ended == end
    assert types(log, "r-1") == ["Message", "Finish"]
    assert lease_of(log, "r-1") is None


def test_an_exception_ends_the_run_with_an_error_naming_it_and_goes_on(log: EventLog) -> None:
    with pytest.raises(ValueError, match="the tool broke"):  # noqa: SIM117 - the order matters
        with owned_run(log, stream=STREAM, run_id="r-1") as run:
            run.append("Message", {"text": "calling a tool"})
            raise ValueError("the tool broke")
    end = log.run_end("r-1")
    assert end is not None and end.type == "Error"
    assert end.data == {"error": "ValueError: the tool broke"}
    assert types(log, "r-1") == ["Message", "Error"]
    assert lease_of(log, "r-1") is None


@pytest.mark.parametrize("terminal", ["Finish", "Error"])
@pytest.mark.parametrize("then_raise", [False, True])
def test_a_run_the_block_ended_itself_is_not_ended_again(
    log: EventLog, terminal: str, then_raise: bool
) -> None:
    with pytest.raises(KeyError) if then_raise else nullcontext():  # noqa: SIM117
        with owned_run(log, stream=STREAM, run_id="r-1") as run:
            ended = run.append(terminal, {"reason": "the block's own"})
            assert lease_of(log, "r-1") is None  # released with the terminal event
            with pytest.raises(RunError, match="has ended"):
                run.append("Message", {"text": "too late"})
            if then_raise:
                raise KeyError("after the end")
    assert log.run_end("r-1") == ended == run.ended
    assert types(log, "r-1") == [terminal]


@pytest.mark.parametrize(
    ("stream", "run_id"),
    [("", "r-1"), (STREAM, ""), ("s" * 201, "r-1"), (STREAM, "r\x00"), (STREAM, 7)],
)
def test_a_bad_stream_or_run_id_is_refused_before_anything_is_written(
    log: EventLog, stream: Any, run_id: Any
) -> None:
    with pytest.raises(InvalidEvent):
        owned_run(log, stream=stream, run_id=run_id)
    assert log.last_seq() == 0
    assert lease_count(log) == 0


@pytest.mark.parametrize("ttl", [0, -1.0, math.nan, math.inf, "10", True])
def test_a_lease_ttl_that_cannot_work_is_refused(log: EventLog, ttl: Any) -> None:
    with pytest.raises(ValueError, match="lease_ttl"):
        owned_run(log, stream=STREAM, run_id="r-1", lease_ttl=ttl)


def test_a_run_is_written_only_inside_its_block(log: EventLog) -> None:
    run = owned_run(log, stream=STREAM)
    with pytest.raises(RunError, match="not open"):
        run.append("Message", {})
    with run:
        run.append("Message", {})
    with pytest.raises(RunError, match="not open"):
        run.append("Message", {})
    with pytest.raises(RunError, match="opened already"), run:
        pass
    assert types(log, run.run_id) == ["Message", "Finish"]


def test_a_run_owned_elsewhere_or_ended_cannot_be_opened(log: EventLog) -> None:
    with owned_run(log, stream=STREAM, run_id="r-1") as run:
        with pytest.raises(RunConflict, match="owned by another process"):  # noqa: SIM117
            with owned_run(log, stream=STREAM, run_id="r-1"):
                pass
        run.append("Message", {"text": "still ours"})
    with pytest.raises(RunError, match="already ended with Finish"):  # noqa: SIM117
        with owned_run(log, stream=STREAM, run_id="r-1"):
            pass
    assert types(log, "r-1") == ["Message", "Finish"]
    assert lease_count(log) == 0


def test_a_run_declaring_another_users_stream_writes_nothing_there(log: EventLog) -> None:
    StreamOwners(log).declare(STREAM, "bob")
    with pytest.raises(RunError, match="belongs to another user"):  # noqa: SIM117
        with owned_run(log, stream=STREAM, run_id="r-1", owner="alice"):
            pass
    assert types(log, "r-1") == []  # bob never reads alice's events
    assert lease_count(log) == 0
    with owned_run(log, stream=STREAM, run_id="r-1", owner="bob") as run:  # the owner may
        run.append("Message", {"text": "bob's"})
    assert types(log, "r-1") == ["Message", "Finish"]


# --- the lease ------------------------------------------------------------------------------


class Clock:
    """`time.time` of the lease, the run and the sweeper, moved only by the test: how long the
    renewing thread takes to run never decides whether a lease has expired."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now


def test_renewal_keeps_a_long_running_run_alive_past_several_ttls(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ttl = 0.3  # renewed every 0.1 s of real time
    clock = Clock()
    for module in (lease_module, owned_module, sweeper_module):
        monkeypatch.setattr(module, "time", clock)
    sweeper = OwnedRunSweeper(log)
    with owned_run(log, stream=STREAM, run_id="r-1", lease_ttl=ttl) as run:
        run.append("Message", {"text": "a long tool call"})
        opened = clock.now
        for _ in range(10):  # five TTLs, half a TTL at a time
            clock.now += ttl / 2
            # Renewed since the clock moved: the lease now runs a whole TTL from now.
            wait_until(lambda: lease_of(log, "r-1").expires_at >= clock.now + ttl * 0.9, 20)
            assert sweeper.sweep() == []
        assert clock.now >= opened + 5 * ttl - 1e-9
        run.append("Message", {"text": "done at last"})
    assert types(log, "r-1") == ["Message", "Message", "Finish"]


# --- a process that dies or stalls holding the run ----------------------------------------------


@contextmanager
def writer_process(log_url: str, run_id: str) -> Iterator[subprocess.Popen[str]]:
    """A process inside ``with owned_run(...)``, waiting for a line on its stdin."""
    command = [sys.executable, "-m", "tests.app_runs.owned_run_process"]
    process = subprocess.Popen(
        [*command, log_url, STREAM, run_id, str(TTL)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.communicate(timeout=PROCESS_TIMEOUT)


def test_a_killed_writers_run_is_ended_once_by_racing_sweepers(log_url: str) -> None:
    EventLog(log_url).close()  # the schema in place before the writer starts
    with writer_process(log_url, "r-killed") as writer:
        writer.kill()  # SIGKILL, inside the block
        writer.wait(PROCESS_TIMEOUT)
    logs = [EventLog(log_url) for _ in range(2)]  # two gateway processes, as it were
    try:
        wait_until(lambda: lease_of(logs[0], "r-killed").expires_at < time.time(), 30)
        start = threading.Barrier(len(logs))
        swept: list[list[Any]] = []

        def sweep(log: EventLog) -> None:
            start.wait()
            swept.append(OwnedRunSweeper(log).sweep())

        threads = [threading.Thread(target=sweep, args=(log,)) for log in logs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PROCESS_TIMEOUT)
        assert sorted(len(events) for events in swept) == [0, 1]
        assert types(logs[0], "r-killed") == ["Message", "Error"]
        events = logs[0].read(run_id="r-killed")
        assert events[0].data == BEFORE
        assert events[1].data["error"].startswith("the process writing this run stopped")
        assert lease_count(logs[0]) == 0
    finally:
        for log in logs:
            log.close()


def test_a_stalled_writer_whose_run_was_swept_appends_nothing_more(log_url: str) -> None:
    EventLog(log_url).close()
    with writer_process(log_url, "r-stalled") as writer, EventLog(log_url) as log:
        os.kill(writer.pid, signal.SIGSTOP)  # its renewals stop, as in a long GC pause
        wait_until(lambda: lease_of(log, "r-stalled").expires_at < time.time(), 30)
        assert len(OwnedRunSweeper(log).sweep()) == 1
        os.kill(writer.pid, signal.SIGCONT)
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdin.write("go on\n")
        writer.stdin.flush()
        answer = writer.stdout.readline()
        assert answer.startswith("refused: "), answer
        assert "lost its lease" in answer
        assert writer.wait(PROCESS_TIMEOUT) == 0
        assert types(log, "r-stalled") == ["Message", "Error"]
        assert AFTER not in [e.data for e in log.read(run_id="r-stalled")]
