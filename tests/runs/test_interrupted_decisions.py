"""A decision about a run is carried to its end even when whoever reported goose's event is
cancelled meanwhile: the connection that read it may be torn down (its lost-run watchdog saw
the run move to another session, or asked to look again header-less) in the middle."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from gateway_kit.runs.events import RECOVERY_STARTED
from gateway_kit.testing import TEXT_ONLY_MODEL_ERROR, FakeGoose, Turn
from tests.runs.plugins import built_ins
from tests.support.runs import bound_session, gateway_client, start_run, wait_status
from tests.support.waiting import until


def test_a_recovery_finishes_though_the_old_sessions_connection_ends_in_its_middle(
    log_url: str,
) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=built_ins()) as (client, gateway, log):
            pumps = gateway.pumps
            assert pumps is not None
            old = bound_session(
                fake, gateway, Turn().text("Let me look at it.").error(TEXT_ONLY_MODEL_ERROR)
            )
            # The recovery is held once its attempt is recorded (the run now belongs to the new
            # session), until the old session's pump, finding no active run, has stopped.
            store = pumps.store
            rebind, moving, go_on = store.rebind, threading.Event(), threading.Event()

            def held_rebind(*args: Any) -> Any:
                moving.set()
                go_on.wait(30)
                return rebind(*args)

            store.rebind = held_rebind  # type: ignore[method-assign]
            run_id = await start_run(client, "check the screenshot")
            try:
                await until(moving.is_set, failure=lambda: "the recovery never started")
                await until(lambda: not pumps.running(old), failure=lambda: "the pump stayed")
            finally:
                go_on.set()
            shown = await wait_status(client, run_id, "finished")
            recoveries = [e.data["attempt"] for e in log.read(0, types=[RECOVERY_STARTED])]

        assert [(a["kind"], a["recovery"]) for a in shown["attempts"]] == [
            ("initial", None),
            ("recovery", "visual_fallback"),
        ]
        assert recoveries == [2]
        retries = [c for c in fake.reply_calls if c.session_id != old]
        assert [c.request_id for c in retries] == [shown["attempts"][1]["upstream_request_id"]]

    asyncio.run(main())
