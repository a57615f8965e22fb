"""A client over real HTTP (uvicorn, the fake goose served too) reading only a run's end and
its state sees that the publish guard gave up on it, and never where the pages live on the
server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    GooseUpstream,
    LifecycleSettings,
    StreamOwners,
)
from gateway_kit.testing import FakeGoose
from tests.support.serving import serve_in_thread
from tests.support.upstream import FAST
from tests.support.waiting import wait_until

from .publish import NAME, OWNER, claiming, page, public_root, template

STREAM = "pages"
SAYS = "The page is ready: [foxes](/MindSpace/alice/public/foxes.html)"


@dataclass
class Seen:
    """What clients were given of one run: its state, its events as the run's SSE, and the
    stream's events as a JSON page."""

    shown: dict[str, Any]
    sse: str
    page: dict[str, Any]

    def envelopes(self) -> list[dict[str, Any]]:
        return [
            json.loads(line[len("data: ") :])
            for line in self.sse.splitlines()
            if line.startswith("data: ")
        ]


def served_run(sqlite_url: str, tmp_path: Path, says: str) -> Seen:
    """A run whose every turn ends by saying `says`, over real HTTP, held to the guard with
    one follow-up; what clients see of it once it has ended."""
    fake = FakeGoose(ping_interval=0.05, default_turn=lambda message: claiming(says))
    with EventLog(sqlite_url) as log, serve_in_thread(fake, lifespan="off") as goose_url:
        StreamOwners(log).declare(STREAM, OWNER)
        gateway = Gateway(
            log=log,
            upstream=GooseUpstream(base_url=goose_url, secret_key=fake.secret_key),
            plugin_config={NAME: {"public_root": template(tmp_path)}},
            settings=GatewaySettings(pumps=FAST, lifecycle=LifecycleSettings(max_follow_ups=1)),
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
            stream_page = http.get(
                f"/gateway/streams/{STREAM}/events", headers={"accept": "application/json"}
            )
    return Seen(shown, replayed.text, stream_page.json())


def test_a_run_whose_page_never_appears_ends_flagged_over_http(
    sqlite_url: str, tmp_path: Path
) -> None:
    public_root(tmp_path)
    seen = served_run(sqlite_url, tmp_path, SAYS)
    envelopes = seen.envelopes()
    end = envelopes[-1]
    assert end["type"] == "Finish" and end["data"]["guard_failed"] is True
    assert envelopes[-2]["type"] == "guard_failed"
    assert envelopes[-2]["data"]["missing"] == ["public/foxes.html"]
    assert seen.shown["status"] == "finished" and seen.shown["guard_failed"] is True
    assert [a["kind"] for a in seen.shown["attempts"]] == ["initial", "follow_up"]


def test_no_client_is_told_the_servers_path_of_the_public_root(
    sqlite_url: str, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    (root / "foxes.html").write_text(page("img/fox.png", "style/site.css"))  # its assets missing
    seen = served_run(sqlite_url, tmp_path, SAYS)
    envelopes = seen.envelopes()
    kinds = [e["type"] for e in envelopes]
    assert kinds.count("FollowUpStarted") == 1 and "guard_failed" in kinds
    [follow_up] = [e["data"] for e in envelopes if e["type"] == "FollowUpStarted"]
    named = ["public/img/fox.png", "public/style/site.css"]
    assert follow_up["missing"] == named and all(f"- {n}" in follow_up["prompt"] for n in named)
    # Every event of the run, the stream's page and the run's state: the root's path (and the
    # folders above it) appears nowhere.
    told = json.dumps([envelopes, seen.page, seen.shown], ensure_ascii=False)
    assert len(seen.page["events"]) == len(envelopes)
    for secret in {str(root), str(root.resolve()), str(tmp_path)}:
        assert secret not in told
