"""Replaying a recording against both sides, in process, request by request, in order.

Each side is a client of its own with its own cookie jar: a recorded login sets each side's
own session, sent back on that side's later requests. A recorded ``Cookie`` header is sent
too, with each side's own cookies of the same name in place of the recorded ones. The app
alone answers each request first, then the gateway: a request that changes what is on disk
(their shared database) changes it twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from ..types import ASGIApp
from .call import Answer, Limits, call, quiet_about_gone_clients, scope_of
from .compare import differences
from .difference import Difference
from .lifespan import running
from .reading import Recording, read_recording
from .recorded import Recorded
from .target import sides_of

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Verdict:
    number: int
    request: Recorded
    app: Answer
    gateway: Answer
    differences: list[Difference]


@dataclass(frozen=True, slots=True)
class Findings:
    recording: Recording
    verdicts: list[Verdict]

    @property
    def differing(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.differences]


class Client:
    """One side of the check: its app, and its own cookie jar."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits
        self.jar = httpx.Cookies()

    async def send(self, request: Recorded) -> Answer:
        scope = scope_of(request, self.cookie_for(request))
        answer = await call(self.app, scope, request.body, self.limits)
        if answer.status is not None:
            sent = httpx.Request(request.method, request.url)
            self.jar.extract_cookies(httpx.Response(answer.status, headers=answer.headers,
                                                    request=sent))  # fmt: skip
        return answer

    def cookie_for(self, request: Recorded) -> str | None:
        """The recorded cookies, with this side's own in place of those of the same name."""
        probe = httpx.Request(request.method, request.url)
        self.jar.set_cookie_header(probe)
        recorded = "; ".join(v for k, v in request.headers if k.lower() == "cookie")
        pairs = dict(cookie_pairs(recorded))
        pairs.update(cookie_pairs(probe.headers.get("cookie", "")))
        return "; ".join(f"{name}={value}" for name, value in pairs.items()) or None


def cookie_pairs(header: str) -> list[tuple[str, str]]:
    pairs = (part.strip().partition("=") for part in header.split(";"))
    return [(name, value) for name, _, value in pairs if name]


async def replay(
    requests: list[Recorded], app: ASGIApp, gateway: ASGIApp, limits: Limits, progress: Progress
) -> list[Verdict]:
    asyncio.get_running_loop().set_exception_handler(quiet_about_gone_clients)
    alone, wrapped = Client(app, limits), Client(gateway, limits)
    verdicts = []
    async with running(app, "the app"), running(gateway, "the gateway"):
        for number, request in enumerate(requests, start=1):
            answer = await alone.send(request)
            wrapped_answer = await wrapped.send(request)
            verdicts.append(Verdict(number, request, answer, wrapped_answer,
                                    differences(answer, wrapped_answer)))  # fmt: skip
            progress(number, len(requests))
    return verdicts


def check(spec: str, path: str | Path, limits: Limits, progress: Progress) -> Findings:
    """Replay the requests of `path` against both sides of `spec` (MODULE:ATTR). The file is
    read and checked whole before MODULE is imported, and so before any request is sent."""
    recording = read_recording(path)
    with sides_of(spec, max_body=limits.max_body) as sides:
        verdicts = asyncio.run(
            replay(recording.requests, sides.app, sides.gateway, limits, progress)
        )
    return Findings(recording, verdicts)
