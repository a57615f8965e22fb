"""A finish guard that never returns holds up no other run and no bill: after the hook timeout
it counts as failed (logged with its name; its runs end ``guard_failed``, never as delivered),
and `bill_run` has threads of its own."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from gateway_kit import Event, GatewaySettings, hookimpl
from gateway_kit.hooks import manager
from gateway_kit.runs.billing import BillingSettings
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.testing import FakeGoose
from tests.runs.plugins import Ledger
from tests.support.runs import gateway_client, start_run, wait_status
from tests.support.waiting import until

LIFECYCLE_THREADS = 2  # few, so that the stuck runs alone would take them all
STUCK_RUNS = 3
OTHER_RUNS = 3


class HangingGuard:
    """Never returns for the runs of the streams ``stuck-*`` (until released)."""

    __name__ = "hanging-guard"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = 0
        self.lock = threading.Lock()

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> None:
        if run.stream.startswith("stuck-"):
            with self.lock:
                self.entered += 1
            self.release.wait(30)


def test_a_hanging_finish_guard_leaves_other_runs_their_end_and_every_run_its_bill(
    log_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(manager, "LIFECYCLE_THREADS", LIFECYCLE_THREADS)
    guard, ledger = HangingGuard(), Ledger()
    billing = BillingSettings(timeout=2.0, retry_delay=0.1, scan_interval=0.2)
    settings = LifecycleSettings(hook_timeout=0.3, billing=billing)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        options: dict[str, Any] = {
            "plugins": [guard, ledger],
            "settings": GatewaySettings(lifecycle=settings),
        }
        async with gateway_client(log_url, fake, **options) as (client, _, _):
            stuck = [await start_run(client, "go", stream=f"stuck-{n}") for n in range(STUCK_RUNS)]
            await until(lambda: guard.entered >= LIFECYCLE_THREADS)
            others = [await start_run(client, "go", stream=f"free-{n}") for n in range(OTHER_RUNS)]
            for run_id in others:
                assert (await wait_status(client, run_id, "finished"))["guard_failed"] is False
            for run_id in stuck:
                assert (await wait_status(client, run_id, "finished"))["guard_failed"] is True
            await until(
                lambda: len(ledger.billed) == STUCK_RUNS + OTHER_RUNS,
                failure=lambda: f"bills delivered: {sorted(ledger.billed)}",
            )
            assert guard.entered == STUCK_RUNS  # still hanging, every one of them

    with caplog.at_level(logging.ERROR):
        try:
            asyncio.run(main())
        finally:
            guard.release.set()
    assert len(ledger.calls) == STUCK_RUNS + OTHER_RUNS  # once each
    messages = [r.getMessage() for r in caplog.records]
    assert any("'hanging-guard' did not answer finish_guard within 0.3 s" in m for m in messages)
