"""The router of the stack's parts: parameters, methods, 405 with Allow, what it passes on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from gateway_kit.http.errors import HTTPError, send_json
from gateway_kit.http.fallback import PrefixNotFound
from gateway_kit.http.request import Request
from gateway_kit.http.routing import Route, Router
from gateway_kit.types import Receive, Scope, Send


async def passed_on(scope: Scope, receive: Receive, send: Send) -> None:
    await send_json(send, 200, {"passed_on": scope["path"]})


class Part:
    """A part with three routes under /p, passing everything else to the app below."""

    def __init__(self, app: Any = passed_on) -> None:
        self.app = app
        self.router = Router(
            "/p",
            [
                Route("/teams/{team}/streams/{stream}", self.show),
                Route("/teams/{team}/streams/{stream}", self.replace, methods=("PUT", "post")),
                Route("/fail", self.fail),
            ],
        )

    async def show(self, request: Request) -> None:
        await send_json(request.send, 200, {"shown": request.path_params})

    async def replace(self, request: Request) -> None:
        await send_json(request.send, 200, {"replaced": request.path_params, "by": request.method})

    async def fail(self, request: Request) -> None:
        raise HTTPError(409, "taken", "someone was first", [(b"x-why", b"race")])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self.router.handle(scope, receive, send):
            await self.app(scope, receive, send)


def call(app: Any, method: str, path: str) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path)

    return asyncio.run(main())


def test_several_path_parameters_are_decoded_one_segment_at_a_time() -> None:
    answer = call(Part(), "GET", "/p/teams/core%20team/streams/a%2Fb").json()
    assert answer == {"shown": {"team": "core team", "stream": "a/b"}}


def test_several_methods_share_a_path_and_others_get_405_with_allow() -> None:
    assert call(Part(), "PUT", "/p/teams/t/streams/s").json()["by"] == "PUT"
    assert call(Part(), "POST", "/p/teams/t/streams/s").json()["by"] == "POST"
    refused = call(Part(), "DELETE", "/p/teams/t/streams/s")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, POST, PUT"
    assert refused.json()["error"] == "method_not_allowed"


@pytest.mark.parametrize(
    "path", ["/p/teams//streams/s", "/p/teams/t/streams", "/p/teams/t/streams/s/x", "/q/fail", "/p"]
)
def test_what_no_route_names_is_passed_on(path: str) -> None:
    assert call(Part(), "GET", path).json() == {"passed_on": path}


def test_an_http_error_raised_by_an_endpoint_is_its_json_answer() -> None:
    answer = call(Part(), "GET", "/p/fail")
    assert (answer.status_code, answer.headers["x-why"]) == (409, "race")
    assert answer.json() == {"error": "taken", "message": "someone was first"}


@pytest.mark.parametrize(
    "path", ["streams/{s}", "/streams/{s}/", "/a//b", "/streams/{s x}", "/x{y}"]
)
def test_a_route_path_must_be_segments_and_parameters(path: str) -> None:
    with pytest.raises(ValueError, match="route path"):
        Route(path, Part().show)


def test_the_prefix_belongs_to_the_gateway_even_where_no_part_serves_it() -> None:
    app = Part(PrefixNotFound(passed_on, prefix="/p"))
    assert call(app, "GET", "/p/teams/t/streams/s").json()["shown"] == {"team": "t", "stream": "s"}
    for path in ("/p", "/p/", "/p/unknown"):
        answer = call(app, "GET", path)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    assert call(app, "GET", "/elsewhere").json() == {"passed_on": "/elsewhere"}


def test_path_parameters_are_utf8_however_they_are_sent() -> None:
    async def main(raw_path: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": "GET", "path": "", "raw_path": raw_path, "headers": []}
        await Part()(scope, receive, send)
        return sent

    for raw in ("/p/teams/caf\u00e9/streams/s".encode(), b"/p/teams/caf%C3%A9/streams/s"):
        body = asyncio.run(main(raw))[1]["body"]
        assert json.loads(body)["shown"]["team"] == "caf\u00e9"
    refused = call(Part(), "GET", "/p/teams/%FF/streams/s")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_path"
