"""A client over real HTTP (uvicorn, the fake goose served too) reading only a run's end and
its state sees that the publish guard gave up on it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from gateway_kit import EventLog, Gateway, GooseUpstream, LifecycleSettings, StreamOwners
from gateway_kit.testing import FakeGoose

from ..serving import serve_in_thread
from ..upstream.harness import FAST
from ..waiting import wait_until
from .publish import NAME, OWNER, claiming, public_root, template

STREAM = "pages"
SAYS = "The page is ready: [foxes](/MindSpace/alice/public/foxes.html)"


def test_a_run_whose_page_never_appears_ends_flagged_over_http(
    sqlite_url: str, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    fake = FakeGoose(ping_interval=0.05, default_turn=lambda message: claiming(SAYS))
    with EventLog(sqlite_url) as log, serve_in_thread(fake, lifespan="off") as goose_url:
        StreamOwners(log).declare(STREAM, OWNER)
        gateway = Gateway(
            log=log,
            upstream=GooseUpstream(base_url=goose_url, secret_key=fake.secret_key),
            plugin_config={NAME: {"public_root": template(tmp_path)}},
            lifecycle_settings=LifecycleSettings(max_follow_ups=1),
            pump_settings=FAST,
            allow_anonymous=True,
            load_entry_points=False,
        )
        with serve_in_thread(gateway) as base, httpx.Client(base_url=base, timeout=20) as http:
            started = http.post(f"/gateway/streams/{STREAM}/runs", json={"message": "foxes"})
            assert started.status_code == 200, started.text
            run_id = started.json()["run_id"]
            wait_until(lambda: http.get(f"/gateway/runs/{run_id}").json()["status"] != "active", 20)
            shown = http.get(f"/gateway/runs/{run_id}").json()
            replayed = http.get(f"/gateway/runs/{run_id}/events")
    envelopes = [
        json.loads(line[len("data: ") :])
        for line in replayed.text.splitlines()
        if line.startswith("data: ")
    ]
    end = envelopes[-1]
    assert end["type"] == "Finish" and end["data"]["guard_failed"] is True
    assert envelopes[-2]["type"] == "guard_failed"
    assert envelopes[-2]["data"]["missing"] == [f"{root}/foxes.html"]
    assert shown["status"] == "finished" and shown["guard_failed"] is True
    assert [a["kind"] for a in shown["attempts"]] == ["initial", "follow_up"]
