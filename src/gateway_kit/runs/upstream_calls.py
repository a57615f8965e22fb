"""`UpstreamCalls`: goose's `reply` and `cancel` for runs, each answered within
`LifecycleSettings.reply_timeout`.

goose answers a `reply` at once and works in the background, so a longer wait means a goose that
hangs: the reply is an `UpstreamTimeout`, and a cancel is only logged. A reply refused because
the session is busy is sent again within `busy_wait` (`busy.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..coordination.tasks import TaskSet
from ..exceptions import UpstreamError, UpstreamTimeout
from .async_store import AsyncRunStore
from .busy import reply_when_free, still_wanted
from .lifecycle_settings import LifecycleSettings
from .model import Run
from .ports import Upstream

logger = logging.getLogger(__name__)

NO_ANSWER = "goose did not answer {call} within {seconds:g} s"


class UpstreamCalls:
    """:param upstream: goose.
    :param runs: the runs, to tell whether a reply is still wanted.
    :param settings: `reply_timeout` and `busy_wait`.
    """

    def __init__(self, upstream: Upstream, runs: AsyncRunStore, settings: LifecycleSettings):
        self.upstream = upstream
        self.runs = runs
        self.settings = settings
        self._tasks = TaskSet()

    async def reply(
        self,
        session_id: str,
        text: str,
        request_id: str,
        *,
        override_conversation: list[dict[str, Any]] | None = None,
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """goose's `reply`, each try answered within `reply_timeout` (`UpstreamTimeout` past
        it). A reply refused because the session is busy is sent again within `busy_wait`,
        after `release()` has asked goose to drop what may still hold the session."""
        seconds = self.settings.reply_timeout

        async def send() -> None:
            try:
                async with asyncio.timeout(seconds):
                    await self.upstream.reply(
                        session_id, text, request_id, override_conversation=override_conversation
                    )
            except TimeoutError:
                call = f"the reply {request_id}"
                raise UpstreamTimeout(NO_ANSWER.format(call=call, seconds=seconds)) from None

        await reply_when_free(
            send,
            busy_wait=self.settings.busy_wait,
            wanted=lambda: still_wanted(self.runs, request_id),
            release=release,
        )

    async def cancel(self, run: Run) -> None:
        """Ask goose to drop the run's current request; a failure or no answer is logged."""
        request_id = run.upstream_request_id
        try:
            async with asyncio.timeout(self.settings.reply_timeout):
                await self.upstream.cancel(run.session_id, request_id)
        except TimeoutError:
            seconds = self.settings.reply_timeout
            call = f"the cancel of request {request_id}"
            logger.warning(NO_ANSWER.format(call=call, seconds=seconds))
        except UpstreamError as exc:  # goose answers 200 even for an unknown request
            logger.warning("cancelling request %s failed: %s", request_id, exc)

    def cancel_soon(self, run: Run) -> None:
        """Cancel the run's current goose request in the background (a reply that timed out
        may have reached goose after all: nobody would read what it does)."""
        self._tasks.start(self.cancel(run), name="gateway-kit-cancel")

    async def stop(self) -> None:
        await self._tasks.stop()
