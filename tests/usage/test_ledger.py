"""The usage ledger: each bill recorded once, by its key, whatever delivers it again."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from gateway_kit_plugins import usage_ledger

from gateway_kit import EventLog, Gateway, GatewaySettings, PluginError, hookimpl
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.runs.billing import BillingSettings
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.runs.store import RunStore
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.usage import UsageLedger, entry_of
from gateway_kit.usage import ledger as ledger_module
from gateway_kit.usage.ledger import utc_day
from tests.support.runs import bound_session, gateway_client, sse_events, start_run, wait_status
from tests.support.upstream import until

from .billing import DAY, days, deliver, ended, entries, undeliver, usage

QUICK = LifecycleSettings(billing=BillingSettings(retry_delay=0.05, scan_interval=0.05))


def delivered(store: RunStore, run_id: str, *, tries: int) -> bool:
    """Whether the run's bill is delivered, at its `tries`-th delivery."""
    bill = store.bill(run_id)
    return bill is not None and bill.delivered_at is not None and bill.tries == tries


class Deliveries:
    """Every `bill_run` call's key: the bills the outbox delivered, again or not."""

    __name__ = "deliveries"

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.lock = threading.Lock()

    @hookimpl
    def bill_run(self, run: Any, usage: dict[str, Any], idempotency_key: str) -> None:
        with self.lock:
            self.keys.append(idempotency_key)


def test_a_bill_delivered_again_is_counted_once(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    StreamOwners(log).declare("conv", "alice")
    StreamOwners(log).declare("other", "alice")
    yesterday = time.time() - DAY
    first, second = ended("r1", "conv"), ended("r2", "other", finished_at=yesterday)
    for _ in range(3):
        deliver(gateway, first, usage(10, 5, cost=0.25))
    deliver(gateway, second, usage(7, 3))
    deliver(gateway, second, usage(7, 3))

    today = utc_day(time.time())
    assert entries(log) == [
        (idempotency_key("r1"), "alice", today, 10, 5),
        (idempotency_key("r2"), "alice", utc_day(yesterday), 7, 3),
    ]
    assert days(log) == [("alice", utc_day(yesterday), 1, 7, 3, 0.0),
                         ("alice", today, 1, 10, 5, 0.25)]  # fmt: skip
    totals = UsageLedger(log).totals("alice")
    assert (totals.runs, totals.total_tokens, totals.cost) == (2, 25, 0.25)


def test_a_run_is_in_its_owners_ledger_once_across_replay_redelivery_and_restart(
    log_url: str,
) -> None:
    deliveries = Deliveries()
    options = {"plugins": [deliveries], "settings": GatewaySettings(lifecycle=QUICK)}

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, **options) as (client, gateway, log):
            StreamOwners(log).declare("conv", "alice")
            bound_session(fake, gateway, Turn().text("a").usage(10, 5))
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            store = gateway.pumps.store  # type: ignore[union-attr]
            await until(lambda: (b := store.bill(run_id)) is not None and b.delivered_at)
            for _ in range(2):  # clients replaying the run
                replay = await client.get(f"/gateway/runs/{run_id}/events")
                assert sse_events(replay.text)[-1]["type"] == "Finish"
            after_replay = entries(log)
            # The process died after bill_run, before the bill was marked delivered: the
            # outbox's scan delivers it again, with the same key.
            undeliver(log, run_id)
            await until(lambda: delivered(store, run_id, tries=2))
            after_redelivery = entries(log)
        with EventLog(log_url) as stopped:  # once this gateway's outbox has stopped
            undeliver(stopped, run_id)
        # A new gateway on the same database delivers what the last one left undelivered.
        async with gateway_client(log_url, fake, **options) as (client, restarted, log):
            await client.get(f"/gateway/runs/{run_id}")  # the first request starts its work
            store = restarted.pumps.store  # type: ignore[union-attr]
            await until(lambda: delivered(store, run_id, tries=3))
            after_restart, per_day = entries(log), days(log)

        key = idempotency_key(run_id)
        assert deliveries.keys == [key] * 3
        today = utc_day(time.time())
        assert after_replay == after_redelivery == after_restart == [(key, "alice", today, 10, 5)]
        assert per_day == [("alice", today, 1, 10, 5, 0.0)]

    asyncio.run(main())


def test_blocking_the_plugin_leaves_the_ledger_empty(log_url: str) -> None:
    deliveries = Deliveries()
    options = {"plugins": [deliveries], "settings": GatewaySettings(lifecycle=QUICK),
               "block_plugins": ["usage_ledger"]}  # fmt: skip

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, **options) as (client, gateway, log):
            assert "usage_ledger" not in {p.name for p in gateway.plugins.describe()}
            StreamOwners(log).declare("conv", "alice")
            bound_session(fake, gateway, Turn().text("a").usage(10, 5))
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            await until(lambda: deliveries.keys)  # the bill was delivered, to the others
            assert (entries(log), days(log)) == ([], [])

    asyncio.run(main())


def test_the_ledger_is_on_by_default_and_takes_no_settings(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    [ledger] = [p for p in gateway.plugins.describe() if p.name == "usage_ledger"]
    assert ledger.source.kind == "built-in" and "bill_run" in ledger.hooks
    with pytest.raises(PluginError, match="refused its settings: usage_ledger takes no settings"):
        Gateway(log=log, allow_anonymous=True, plugin_config={"usage_ledger": {"rate": 2}})


def test_a_run_of_a_stream_with_no_owner_is_left_out_and_named(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins.usage_ledger"):
        deliver(gateway, ended("r-nobody", "unowned"), usage(4, 4))
    assert entries(log) == []
    assert "run r-nobody of stream 'unowned'" in caplog.text


def test_the_plugins_doc_shows_the_plugins_real_code() -> None:
    source = Path(usage_ledger.__file__).read_text(encoding="utf-8")
    code = source[source.index("from __future__") :]
    assert code in (Path(__file__).parents[2] / "docs" / "plugin_hooks.md").read_text(
        encoding="utf-8"
    )


def test_every_entry_is_listed_page_by_page_in_the_order_billed(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_module, "ENTRIES_PAGE", 2)
    ledger = UsageLedger(log)
    for n in range(5):  # two entries billed at the same moment: their keys order them
        run = ended(f"r{n}", "conv")
        ledger.record(entry_of(run, usage(n, 0), f"key-{n}", "alice", float(n // 2)))
    ledger.record(entry_of(ended("b", "bob"), usage(1, 1), "key-b", "bob", 0.0))

    listed = [entry.idempotency_key for entry in ledger.all_entries("alice")]
    assert listed == [f"key-{n}" for n in range(5)]
