"""Two gateway processes on PostgreSQL: one is killed mid-run, the other finishes the run."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from gateway_kit import EventLog
from gateway_kit.testing import FakeGoose, echo_turn

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def goose_server(fake: FakeGoose) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(fake, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def gateway_process(
    db_url: str, goose_url: str, secret: str, tmp: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port_file = tmp / f"port-{time.monotonic_ns()}"
    output = (tmp / f"{port_file.name}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.upstream.gateway_process", db_url, goose_url, secret,
         str(port_file)],
        cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = ""
        for _ in range(600):
            if port_file.exists() and port_file.read_text():
                url = f"http://127.0.0.1:{port_file.read_text()}"
                try:
                    httpx.get(f"{url}/gateway/runs/none", timeout=1)
                    break
                except httpx.TransportError:
                    pass
            assert proc.poll() is None, Path(output.name).read_text()
            time.sleep(0.05)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        output.close()


def test_the_surviving_gateway_takes_the_pump_over(pg_url: str, tmp_path: Path) -> None:
    fake = FakeGoose(ping_interval=0.2, default_turn=functools.partial(echo_turn, chunk_delay=0.8))
    words = " ".join(f"word{i}" for i in range(30))
    with (
        EventLog(pg_url) as log,
        goose_server(fake) as goose_url,
        gateway_process(pg_url, goose_url, fake.secret_key, tmp_path) as (first, first_url),
        gateway_process(pg_url, goose_url, fake.secret_key, tmp_path) as (_, second_url),
    ):
        started = httpx.post(f"{first_url}/gateway/streams/conv/runs", json={"message": words})
        assert started.status_code == 200, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 20
        while not any(e.upstream_event_id for e in log.read(run_id=run_id)):
            assert time.monotonic() < deadline, "the first gateway never pumped"
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)  # mid-run: goose is still typing
        first.wait()
        at_kill = log.read(run_id=run_id)
        assert "Finish" not in [e.type for e in at_kill]

        deadline = time.monotonic() + 30
        while True:
            state = httpx.get(f"{second_url}/gateway/runs/{run_id}").json()
            if state["status"] != "active":
                break
            assert time.monotonic() < deadline, "the second gateway never finished the run"
            time.sleep(0.1)
        events = log.read(run_id=run_id)

    assert state["status"] == "finished"
    # the survivor resumed from the newest goose id the killed one had persisted
    newest_at_kill = max(int(e.upstream_event_id) for e in at_kill if e.upstream_event_id)
    assert str(newest_at_kill) in [call.last_event_id for call in fake.events_calls[1:]]
    ids = [int(e.upstream_event_id) for e in events if e.upstream_event_id is not None]
    assert ids == list(range(1, len(ids) + 1))  # every goose event once, none lost
    assert [e.type for e in events].count("Finish") == 1
    text = "".join(
        c["text"] for e in events if e.type == "Message" for c in e.data["message"]["content"]
    )
    assert text == words
