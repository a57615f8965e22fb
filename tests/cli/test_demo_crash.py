"""``gateway-kit demo`` killed in the middle of a legacy task: once it runs again, the task ends
as failed instead of staying "running" forever."""

from __future__ import annotations

from pathlib import Path

import httpx

from gateway_kit.app_runs.sweeper import OWNER_STOPPED_ERROR

from .commands import (
    EXE,
    STOP_TIMEOUT,
    STREAM_TIMEOUT,
    free_port,
    legacy_task,
    read_banner,
    running,
    sse_events,
    stop,
)

STOPPED = OWNER_STOPPED_ERROR.split(":", 1)[0]  # the message up to the lease's expiry time


def test_a_legacy_task_killed_with_the_demo_ends_failed_after_the_restart(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [*EXE, "demo", "--port", str(port)]
    with httpx.Client(timeout=STREAM_TIMEOUT) as client:
        with running(command, tmp_path) as demo:
            read_banner(demo)
            task_id = legacy_task(client, base, "cut short")
            run_url = f"{base}/gateway/runs/{task_id}/events"
            with client.stream("GET", run_url) as stream:
                received = sse_events(stream.iter_lines())
                assert next(e for e in received if e["data"].get("role") == "assistant")
            before = client.get(f"{base}/api/tasks/{task_id}", params={"from": 0}).json()
            demo.kill()  # SIGKILL, with the reply half written
            demo.communicate(timeout=STOP_TIMEOUT)
        with running(command, tmp_path) as demo:
            read_banner(demo)
            # The run stream waits for the run's end: the sweeper's Error, once the killed
            # process's lease has run out.
            with client.stream("GET", run_url) as stream:
                events = list(sse_events(stream.iter_lines()))
            polled = client.get(f"{base}/api/tasks/{task_id}", params={"from": 0}).json()
            out, err = stop(demo)
    assert before["status"] == "running"
    assert demo.returncode == 0
    assert "Traceback" not in out + err
    assert [e["type"] for e in events][-1] == "Error"
    assert [e["type"] for e in events].count("Error") == 1
    assert "Finish" not in [e["type"] for e in events]
    assert events[-1]["data"]["error"].startswith(STOPPED)
    assert events[0]["data"]["text"] == "cut short"
    assert polled["status"] == "failed"
    assert polled["events"][-1]["data"] == events[-1]["data"]
    assert [e["type"] for e in polled["events"]] == [e["type"] for e in events]
