"""``gateway-kit serve`` and ``gateway-kit demo`` as a user runs them: real processes, real HTTP."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.demo.goose import TOOL_NAME
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.upstream.goose.connection import LOST_RUN_ERROR

from .commands import (
    EXE,
    STREAM_TIMEOUT,
    free_port,
    legacy_task,
    read_banner,
    running,
    sse_events,
    stop,
    wait_until_serving,
)

CTRL_C_TIMEOUT = 10.0  # far more than a clean stop takes; an open stream blocking it takes ever
PORT_8000_TURNS = "/tmp/gateway-kit-tests-port-8000.lock"
URL = re.compile(r"http://[^\s'\"]+")

PLAIN_FLASK_APP = """
from flask import Flask

app = Flask(__name__)


@app.get("/hello")
def hello():
    return {"hello": "from a plain Flask app"}
"""


def log_in(client: httpx.Client, base: str) -> None:
    """Log in as the demo's user, as its banner shows; the CSRF token goes with every request."""
    answer = client.post(f"{base}/login", json={"username": "demo", "password": "demo"})
    assert answer.status_code == 200, answer.text
    client.headers["x-csrf-token"] = answer.json()["csrf_token"]


def start_goose_run(client: httpx.Client, runs_url: str, message: str) -> str:
    if "x-csrf-token" not in client.headers:
        log_in(client, runs_url.partition("/gateway/")[0])
    started = client.post(runs_url, json={"message": message})
    assert started.status_code == 200, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def wait_until_ended(client: httpx.Client, base: str, run_id: str) -> None:
    """Wait for the gateway to record the end of a run whose stream has ended.

    The pump appends a run's terminal event, then records the run as ended: a client that starts
    the next run the moment the stream ends can be refused with a 409 in between.
    """
    deadline = time.monotonic() + STREAM_TIMEOUT
    while client.get(f"{base}/gateway/runs/{run_id}").json()["status"] == "active":
        assert time.monotonic() < deadline, f"run {run_id} is still recorded as active"
        time.sleep(0.05)


def interrupt_a_goose_run(demo: subprocess.Popen[str], runs_url: str, events_url: str) -> str:
    """Start a run, and once goose's first event of it arrived, Ctrl-C the demo; its id."""
    with httpx.Client(timeout=STREAM_TIMEOUT) as client:
        run_id = start_goose_run(client, runs_url, "interrupted")
        with client.stream("GET", events_url.replace("RUN_ID", run_id)) as stream:
            received = sse_events(stream.iter_lines())
            assert next(e for e in received if e["upstream_event_id"] is not None)
            demo.send_signal(signal.SIGINT)
            for _ in received:  # the demo ends the open stream as it stops
                pass
    out, err = demo.communicate(timeout=CTRL_C_TIMEOUT)
    assert demo.returncode == 0
    assert "Traceback" not in out + err
    return run_id


def test_demo_prints_urls_that_work_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        banner = read_banner(demo)
        urls = URL.findall(banner)
        page, login = urls[0], urls[1]
        assert page == f"http://127.0.0.1:{port}/conversations/demo"
        assert login == f"http://127.0.0.1:{port}/login"
        with httpx.Client() as client:
            assert "new EventSource(" in client.get(page).text
            assert 'name="password"' in client.get(login).text
            # The printed curl commands, as httpx requests.
            base = f"http://127.0.0.1:{port}"
            assert "curl -s -c cookies.txt -H 'Content-Type: application/json'" in banner
            assert f"""-d '{{"username": "demo", "password": "demo"}}' {login}""" in banner
            logged_in = client.post(login, json={"username": "demo", "password": "demo"})
            assert logged_in.status_code == 200 and logged_in.json()["csrf_token"]
            assert f"{base}/api/tasks" in urls
            started = client.post(
                f"{base}/api/tasks", json={"conversation_id": "demo", "message": "hello"}
            )
            task_id = started.json()["task_id"]
            poll_url = next(u for u in urls if "$TASK" in u).replace("$TASK", task_id)
            polled = client.get(poll_url).json()
            assert polled["events"][0]["data"]["text"] == "hello"
            # Ctrl-C once the reply is over: a turn cut short by the stop is not this test's.
            deadline = time.monotonic() + STREAM_TIMEOUT
            while polled["status"] == "running":
                assert time.monotonic() < deadline, f"task {task_id} is still running"
                time.sleep(0.1)
                polled = client.get(poll_url.replace("from=0", f"from={polled['next_offset']}"))
                polled = polled.json()
            assert polled["status"] == "completed"
            sse_url = f"{base}/gateway/streams/demo/events"
            assert f"curl -N -b cookies.txt {sse_url}" in banner
            with client.stream("GET", sse_url) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                lines = stream.iter_lines()
                assert next(lines) == "id: 1"
                assert '"text":"hello"' in next(lines)
            out, err = stop(demo)
    assert demo.returncode == 0
    assert "Traceback" not in out + err
    assert (tmp_path / "gateway-demo.db").exists()


def test_the_demo_needs_a_login_unless_anonymous_and_says_so(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    page = f"{base}/gateway/streams/demo/events"
    json_page = {"accept": "application/json"}
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        banner = read_banner(demo)
        assert "anonymous" not in banner
        assert httpx.get(page, headers=json_page).status_code == 401
        stop(demo)
    with running([*EXE, "demo", "--port", str(port), "--anonymous"], tmp_path) as demo:
        banner = read_banner(demo)
        assert "--anonymous: requests without credentials are served as 'anonymous'" in banner
        # What anonymous mode leaves out is said, not found out.
        assert "publish_guard does not check it and no usage is recorded" in " ".join(
            banner.split()
        )
        assert "still needs its login" in banner
        assert httpx.get(page, headers=json_page).status_code == 200
        _, err = stop(demo)
    assert "allow_anonymous=True" in err  # the gateway's own warning, logged at start-up
    # Each of the example app's paths the gateway answers instead of it, named at start-up.
    for path in ("/api/tasks/<task_id>", "/api/usage", "/api/socket-token", "/socket.io"):
        assert f"gateway_kit answers {path} instead of the app" in err


def test_demo_serves_on_a_free_port_when_8000_is_taken(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        # Another copy of the suite on this machine would free 8000 in the middle of this
        # test: the two take turns on it.
        turn = stack.enter_context(open(PORT_8000_TURNS, "w"))
        fcntl.flock(turn, fcntl.LOCK_EX)
        blocker = stack.enter_context(socket.socket())
        try:
            blocker.bind(("127.0.0.1", 8000))
            blocker.listen()
        except OSError as exc:  # taken already, which is what this test needs
            assert exc.errno == errno.EADDRINUSE
        demo = stack.enter_context(running([*EXE, "demo"], tmp_path))
        banner = read_banner(demo)
        port = int(re.findall(r"http://127\.0\.0\.1:(\d+)/", banner)[0])
        assert port != 8000
        assert f"port 8000 is taken; serving on {port} instead" in banner
        assert httpx.get(f"http://127.0.0.1:{port}/login").status_code == 200
        stop(demo)
        assert demo.returncode == 0


def test_demo_refuses_a_port_asked_for_that_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["demo", "--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_runs_a_gateway_module_over_the_db_it_is_given(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/served.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [*EXE, "serve", "gateway_kit.demo.gateway:app", "--db", db, "--port", str(port)]
    with running(command, tmp_path) as server:
        wait_until_serving(server, f"{base}/login")
        with httpx.Client() as client:
            task_id = legacy_task(client, base, "served")
        _, err = stop(server)
    assert server.returncode == 0
    assert "Traceback" not in err
    with EventLog(db) as log:
        assert log.read(run_id=task_id)[0].data["text"] == "served"


@pytest.mark.parametrize(
    ("target", "route"),
    [("plain_site:app", "/hello"), ("gateway_kit.demo.gateway:app", "/login")],
    ids=["plain-flask-app", "gateway-module"],
)
def test_serve_with_workers_serves_the_db_it_is_given_in_every_worker(
    tmp_path: Path, target: str, route: str
) -> None:
    (tmp_path / "plain_site.py").write_text(PLAIN_FLASK_APP)
    db = f"sqlite:///{tmp_path}/workers.db"
    with EventLog(db) as log:
        log.append("s1", "Message", {"text": "in the log"})
        StreamOwners(log).declare("s1", "demo")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [*EXE, "serve", target, "--db", db, "--port", str(port), "--workers", "2"]
    if target == "plain_site:app":
        command.append("--allow-anonymous")  # the plain app has no login
    with running(command, tmp_path) as server:
        wait_until_serving(server, f"{base}{route}")
        with httpx.Client() as client:
            if target != "plain_site:app":  # the demo's users log in; s1 is demo's
                login = {"username": "demo", "password": "demo"}
                assert client.post(f"{base}/login", json=login).status_code == 200
            for _ in range(4):  # whichever worker answers
                assert client.get(f"{base}{route}").status_code == 200
                page = client.get(
                    f"{base}/gateway/streams/s1/events", headers={"accept": "application/json"}
                )
                assert [e["data"] for e in page.json()["events"]] == [{"text": "in the log"}]
        _, err = stop(server)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "is not MODULE:ATTR"),
        ("gateway_kit_no_such_module:app", "cannot import 'gateway_kit_no_such_module'"),
        ("gateway_kit.demo.app:no_such_app", "has no attribute 'no_such_app'"),
    ],
)
def test_serve_explains_a_target_it_cannot_load(
    target: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GATEWAY_KIT_DB", f"sqlite:///{tmp_path}/unused.db")  # restored after
    monkeypatch.syspath_prepend(str(tmp_path))  # sys.path is restored after, too
    monkeypatch.chdir(tmp_path)
    # On a free port: another suite's demo may hold 8000, and a port in use is said first.
    assert main(["serve", target, "--port", str(free_port())]) == 2
    assert message in capsys.readouterr().err


def test_serve_refuses_zero_workers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "gateway_kit.demo.gateway:app", "--workers", "0"])
    assert "is not a positive integer" in capsys.readouterr().err


def test_demo_runs_turns_on_the_simulated_goose_and_stops_on_ctrl_c_mid_run(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        banner = read_banner(demo)
        urls = URL.findall(banner)
        runs_url = f"{base}/gateway/streams/demo/runs"
        assert runs_url in urls
        assert """-d '{"message": "hello"}'""" in banner
        events_url = next(u for u in urls if "$RUN" in u).replace("$RUN", "RUN_ID")
        assert events_url == f"{base}/gateway/runs/RUN_ID/events"
        with httpx.Client(timeout=STREAM_TIMEOUT) as client:
            run_id = start_goose_run(client, runs_url, "hello goose")
            with client.stream("GET", events_url.replace("RUN_ID", run_id)) as stream:
                events = list(sse_events(stream.iter_lines()))  # it ends after the Finish
            wait_until_ended(client, base, run_id)
            run = client.get(f"{base}/gateway/runs/{run_id}").json()
        interrupt_a_goose_run(demo, runs_url, events_url)
    types = [e["type"] for e in events]
    assert types[0] == "RunStarted"
    assert types[-1] == "Finish" and types.count("Finish") == 1
    assert {e["run_id"] for e in events} == {run_id}
    assert run["stream"] == "demo" and run["status"] == "finished"
    # Between RunStarted and the run's Finish every event came from goose and keeps goose's
    # id, counted from 1; goose's own Finish is kept as UpstreamFinish.
    goose = events[1:-1]
    assert [e["upstream_event_id"] for e in goose] == [str(n) for n in range(1, len(goose) + 1)]
    assert goose[-1]["type"] == "UpstreamFinish"
    assert [a["upstream_request_id"] for a in run["attempts"]] == [
        goose[-1]["data"]["chat_request_id"]
    ]
    messages = [e["data"]["message"] for e in events if e["type"] == "Message"]
    contents = [c for message in messages for c in message["content"]]
    text = "".join(c["text"] for c in contents if c["type"] == "text")
    assert "You said: “hello goose”." in text
    tools = [c["toolCall"]["value"]["name"] for c in contents if c["type"] == "toolRequest"]
    assert tools == [TOOL_NAME]


def test_demo_started_again_after_ctrl_c_mid_run_ends_that_run_and_runs_the_next(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    runs_url = f"{base}/gateway/streams/demo/runs"
    events_url = f"{base}/gateway/runs/RUN_ID/events"
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        read_banner(demo)
        interrupted = interrupt_a_goose_run(demo, runs_url, events_url)
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        read_banner(demo)
        with httpx.Client(timeout=STREAM_TIMEOUT) as client:
            log_in(client, base)
            # The new goose never heard of that run: the gateway ends it, not left "running".
            with client.stream("GET", events_url.replace("RUN_ID", interrupted)) as stream:
                ending = list(sse_events(stream.iter_lines()))[-1]
            wait_until_ended(client, base, interrupted)
            shown = client.get(f"{base}/gateway/runs/{interrupted}").json()
            run_id = start_goose_run(client, runs_url, "after the restart")
            with client.stream("GET", events_url.replace("RUN_ID", run_id)) as stream:
                events = list(sse_events(stream.iter_lines()))
        stop(demo)
    assert demo.returncode == 0
    assert ending["type"] == "Error"
    lost_request = shown["attempts"][-1]["upstream_request_id"]
    assert ending["data"]["error"] == LOST_RUN_ERROR.format(request_id=lost_request)
    assert [e["type"] for e in events].count("Finish") == 1
    assert events[-1]["type"] == "Finish"
