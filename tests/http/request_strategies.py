"""Hypothesis strategies for the requests a careless or hostile client sends a gateway: built
from its real route templates (read off its stack), with random methods, mangled segments,
cursors, limits, headers and bodies, plus the legacy task poll and paths that are none of the
gateway's."""

from __future__ import annotations

import json
import string
from typing import Any, TypeVar
from urllib.parse import quote

from hypothesis import strategies as st

from gateway_kit import Gateway
from gateway_kit.http.routing import Route
from gateway_kit.settings import DEFAULT_LEGACY_TASKS_PATH
from tests.support.raw_requests import PREFIX, Call

T = TypeVar("T")
MAX_BODY = 16 * 1024  # small, so that bodies near and over it stay cheap
MAX_MESSAGE = MAX_BODY // 2  # messages between the two limits fit the body, not the run
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
LEGACY = DEFAULT_LEGACY_TASKS_PATH.rstrip("/")
TEMPLATES = {
    "/streams/{stream}/events",
    "/streams/{stream}/runs",
    "/runs/{run_id}/events",
    "/runs/{run_id}/cancel",
    "/runs/{run_id}",
}

# Path segments that are each a way to get a path wrong.
BAD_SEGMENTS = [
    "",
    ".",
    "..",
    "%2e%2e",
    "%2F",
    "a%2Fb",
    "%00",
    "a%00b",
    "%ZZ",
    "%",
    "%%",
    "%E",
    "%FF",
    "%ED%A0%80",  # a UTF-8-encoded surrogate
    "%C3%A9",
    "é",  # raw, not percent-encoded
    "日本",
    "%20",
    "+",
    "s" * 200,
    "s" * 201,
    "%C3%A9" * 201,
]

# Values of a cursor, limit or index that are each a way to get a number wrong.
BAD_NUMBERS = [
    "",
    " ",
    "0",
    "00",
    "-0",
    "-1",
    "+1",
    "1.5",
    "1e3",
    "0x10",
    "abc",
    "١٢٣",  # Arabic-Indic digits: str.isdigit says yes
    "²",
    "\uff15",  # a full-width 5
    "1\x00",
    ":5",
    "x:1",
    "%ZZ",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "%ED%A0%80",  # a UTF-8-encoded surrogate
    "\udc80",  # a lone surrogate, as a client that sends raw bytes may
]
ACCEPTS = [
    "application/json",
    "text/event-stream",
    "application/json, text/event-stream",
    "text/event-stream;q=0.1, application/json",
    "*/*",
    "text/html",
    "application/*",
    "garbage;;;",
]
JSON_TYPES = ["application/json", "application/json; charset=utf-8"]
OTHER_TYPES = [
    "APPLICATION/JSON",
    "application/merge-patch+json",
    "application/jsonx",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "",
    ";",
    "application/json\x00",
]
BAD_LENGTHS = ["abc", "-1", "1e3", "5, 5", "+5", " 7 ", "\u0665"]
ODD_BODIES = [
    b'{"message": "x", "n": NaN}',
    b'{"message": "x", "n": Infinity}',
    b'{"message": "x", "n": 1' + b"0" * 5000 + b"}",  # more digits than an int takes
    b'\xef\xbb\xbf{"message": "x"}',
    b'{"message": "x"',
    b"null",
    b"[]",
    b'"message"',
]
ELSEWHERE = [
    PREFIX,
    PREFIX + "/",
    PREFIX + "//streams/conv/events",
    PREFIX + "x/streams/conv/events",
    "/",
    "/other",
    LEGACY,
    LEGACY + "/",
    "//gateway/streams/conv/events",
]


def weighted(*options: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """One of the strategies, each as often as its weight says."""
    return st.one_of(*[strategy for weight, strategy in options for _ in range(weight)])


def gateway_routes(gateway: Gateway) -> list[Route]:
    """The routes of every part of the gateway's stack, outermost first."""
    found: list[Route] = []
    part: Any = gateway.stack
    while part is not None:
        router = getattr(part, "router", None)
        if router is not None:
            found.extend(router.routes)
        part = getattr(part, "app", None)
    return found


def deep(n: int, closed: bool, beside: bool) -> bytes:
    """JSON nested `n` deep: closed or not, the whole body or beside a good message."""
    nested = b"[" * n + (b"]" * n if closed else b"")
    return b'{"message": "hi", "x": ' + nested + b"}" if beside else nested


class Requests:
    """The strategies of one test, built once: building them per draw costs more than
    serving the request."""

    def __init__(self, routes: list[Route], known: list[str], epoch: str) -> None:
        self.routes = routes
        self.run_id = known[2]
        huge = st.one_of(  # around and above the 4,300 digits Python converts to an int
            st.builds(
                lambda lead, n: lead + "9" * n,
                st.sampled_from(["", "0" * 10, "1"]),
                st.integers(4290, 6000),
            ),
            # Zeros count as digits too: a small number behind thousands of them.
            st.builds(
                lambda n, value: "0" * n + value,
                st.integers(4290, 6000),
                st.integers(0, 2**70).map(str),
            ),
        )
        self.huge = huge
        self.numbers = st.one_of(
            st.integers(0, 2**70).map(str),
            st.integers(-(2**70), -1).map(str),
            huge,
            st.sampled_from(BAD_NUMBERS),
            st.builds(
                lambda e, n: f"{e}:{n}",
                st.sampled_from([epoch, "other-epoch", ""]),
                st.one_of(st.integers(0, 2**64).map(str), huge),
            ),
            st.text(max_size=8),
        )
        self.segments = weighted(
            (4, st.sampled_from(known)),
            (2, st.sampled_from(BAD_SEGMENTS)),
            (1, st.text(max_size=12).map(lambda s: quote(s, safe=""))),
            (
                1,
                st.text(
                    alphabet=string.ascii_letters + string.digits + "-._~:@!$&'()*+,;=%",
                    max_size=12,
                ),
            ),
            (1, st.integers(190, 260).map(lambda n: "s" * n)),
        )
        self.tasks = weighted((3, st.just(known[2])), (1, self.segments))
        self.query = st.lists(
            st.tuples(st.sampled_from(["after", "limit", "from", "x", ""]), self.numbers),
            max_size=4,
        )
        self.bodies = self._bodies()

    def _bodies(self) -> st.SearchStrategy[bytes]:
        lone = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
        surrogates = st.lists(st.one_of(st.characters(), lone), max_size=6).map("".join)
        scalars = st.one_of(
            st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
        )
        documents = st.recursive(
            scalars,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        )
        messages = weighted(
            (3, st.just("hello")),
            (2, st.text(max_size=20)),
            (2, surrogates),
            (1, st.sampled_from(["", "   ", "a\x00b", "\x00", "\U0001f600", "\u2028"])),
            (1, st.integers(MAX_BODY - 64, MAX_BODY + 64).map(lambda n: "x" * n)),
            (1, st.integers(MAX_MESSAGE - 8, MAX_MESSAGE + 8).map(lambda n: "x" * n)),
            (1, documents),
        )
        with_message = st.builds(
            lambda message, extra: {"message": message, **extra},
            messages,
            st.dictionaries(st.text(max_size=5), documents, max_size=2),
        )
        return weighted(
            (1, st.just(b"")),
            (1, st.binary(max_size=64)),
            # ensure_ascii (the default) escapes a lone surrogate as \ud800; unescaped, it
            # can only be sent as UTF-8 bytes json.loads takes with surrogatepass.
            (6, with_message.map(lambda d: json.dumps(d).encode())),
            (
                1,
                with_message.map(
                    lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass")
                ),
            ),
            (1, with_message.map(lambda d: json.dumps(d).encode("utf-16"))),
            (1, documents.map(lambda d: json.dumps(d).encode())),
            (
                2,
                st.builds(deep, st.integers(500, MAX_BODY // 2 - 16), st.booleans(), st.booleans()),
            ),
            (2, st.sampled_from(ODD_BODIES)),
        )


# The parts of a request; a near-valid one gets one or two of them wild, mostly of those its
# route reads (a run's body and its headers, a reader's cursor and Accept).
PARTS = (
    "path",
    "method",
    "query",
    "accept",
    "last-event-id",
    "content-type",
    "content-length",
    "body",
    "chunk",
)
BODY_PARTS = ("body", "body", "content-type", "content-length", "chunk", "path")
READ_PARTS = ("query", "query", "accept", "last-event-id", "last-event-id", "path")


@st.composite
def calls(draw: st.DrawFn, r: Requests) -> Call:
    """A request to a route (or the legacy poll, `None`): near-valid, or wild in every part."""
    route = draw(st.sampled_from([*r.routes, None]))
    starts_run = route is not None and route.path.endswith("/runs")  # the one with a body
    if draw(weighted((2, st.just(True)), (1, st.just(False)))):
        relevant = BODY_PARTS if starts_run else READ_PARTS
        picks = weighted((4, st.sampled_from(relevant)), (1, st.sampled_from(PARTS)))
        wild = set(draw(st.lists(picks, min_size=1, max_size=2)))
    else:
        wild = set(PARTS)

    def part(name: str, good: st.SearchStrategy[T], bad: st.SearchStrategy[T]) -> T:
        return draw(bad if name in wild else good)

    method = part(
        "method", st.just("GET" if route is None else route.methods[0]), st.sampled_from(METHODS)
    )
    path = part("path", good_paths(r, route), wild_paths(r, route))
    good_body = b'{"message": "hello"}' if starts_run else b""
    body = part("body", st.just(good_body), r.bodies)
    headers: list[tuple[bytes, bytes]] = []
    values = {
        "accept": (
            st.sampled_from([None, "application/json", "text/event-stream"]),
            st.one_of(st.none(), st.sampled_from(ACCEPTS)),
        ),
        "last-event-id": (
            st.one_of(st.none(), st.integers(0, 50).map(str)),
            st.one_of(st.none(), r.numbers.filter(lambda v: "\r" not in v and "\n" not in v)),
        ),
        "content-type": (
            st.just("application/json" if body else None),
            weighted(
                (1, st.none()), (2, st.sampled_from(JSON_TYPES)), (2, st.sampled_from(OTHER_TYPES))
            ),
        ),
        "content-length": (
            st.sampled_from([None, str(len(body))]),
            weighted(
                (1, st.none()),
                (1, st.integers(0, 2 * MAX_BODY).map(str)),  # a lie, most likely
                (1, r.huge),
                (1, st.sampled_from(BAD_LENGTHS)),
            ),
        ),
    }
    for name, (good, bad) in values.items():
        value = part(name, good, bad)
        if value is not None:
            headers.append((name.encode(), value.encode("utf-8", "surrogateescape")))
    pairs = part(
        "query", st.sampled_from([[], [("after", "0")], [("limit", "5")], [("from", "0")]]), r.query
    )
    encode = draw(
        st.sampled_from([lambda v: quote(v, safe="", errors="surrogateescape"), lambda v: v])
    )
    query = "&".join(f"{key}={encode(value)}" for key, value in pairs).encode(
        "utf-8", "surrogateescape"
    )
    chunk = part("chunk", st.just(0), st.integers(1, 4096))
    return Call(method, path.encode("utf-8"), query, headers, body, chunk)


def good_paths(r: Requests, route: Route | None) -> st.SearchStrategy[str]:
    """The route's path with names the log knows: a stream of it, the run it holds."""
    if route is None:
        return st.just(f"{LEGACY}/{r.run_id}")
    names = {"stream": st.sampled_from(["conv", "other"]), "run_id": st.just(r.run_id)}
    parts = [
        st.just(literal) if literal is not None else names.get(name or "", r.segments)
        for literal, name in route.segments
    ]
    return st.tuples(*parts).map(lambda filled: PREFIX + "/" + "/".join(filled))


@st.composite
def wild_paths(draw: st.DrawFn, r: Requests, route: Route | None) -> str:
    """The route's path filled in badly and sometimes mangled, or a path none of the gateway's."""
    if draw(weighted((1, st.just(True)), (9, st.just(False)))):
        return draw(st.sampled_from(ELSEWHERE))
    if route is None:
        tail = draw(st.sampled_from(["", "", "", "/", "/x", "//"]))
        return f"{LEGACY}/{draw(r.tasks)}{tail}"
    parts = [draw(r.segments) if literal is None else literal for literal, _ in route.segments]
    mangle = draw(st.sampled_from(["none"] * 4 + ["literal", "append", "drop", "slash"]))
    if mangle == "literal":
        parts[draw(st.integers(0, len(parts) - 1))] = draw(r.segments)
    elif mangle == "append":
        parts.append(draw(r.segments))
    elif mangle == "drop":
        parts.pop()
    elif mangle == "slash":
        parts.append("")
    return PREFIX + "/" + "/".join(parts)
