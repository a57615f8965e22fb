"""Reading recordings: what a Chromium HAR file and JSON lines turn into, and that any text
is either requests or one `BadRecording` naming where, never another error."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given
from hypothesis import strategies as st

from gateway_kit.adopt import BadRecording
from gateway_kit.adopt.reading import parse_recording, read_recording

from .conftest import RECORDINGS


def test_a_chromium_har_gives_the_pages_own_requests_as_the_browser_sent_them() -> None:
    recording = read_recording(RECORDINGS / "chromium.har")
    assert recording.kind == "HAR"
    assert recording.skipped == {"to other origins": 1, "WebSocket connections": 1}
    assert [(r.method, r.target) for r in recording.requests] == [
        ("GET", "/page"),
        ("POST", "/login"),
        ("GET", "/me"),
        ("GET", "/orders/latest?count=3"),
        ("GET", "/events"),
    ]
    login = recording.requests[1]
    assert (login.scheme, login.host, login.body) == (
        "https",
        "shop.example.test",
        b'{"user":"ada"}',
    )
    names = {name for request in recording.requests for name, _ in request.headers}
    # HTTP/2's pseudo-headers, the connection's headers and Accept-Encoding are not replayed.
    assert not {n for n in names if n.startswith(":")}
    assert not names & {"accept-encoding", "content-length", "connection", "upgrade"}
    assert ("content-type", "application/json") in login.headers
    me = recording.requests[2]
    assert ("cookie", "site_session=Wq3x9RkT0aZb7yLmN2cVd8fHj5sP1eUo; theme=dark") in me.headers


def test_json_lines_take_headers_as_an_object_or_pairs_and_a_json_body() -> None:
    pairs = [["X-A", "1"], ["X-A", "2"]]
    first_line = {"method": "post", "path": "/a?b=1", "headers": pairs, "body": "é"}
    second_line = {"method": "PUT", "path": "/c", "headers": {"X-B": "3"}, "json": {"d": [1]}}
    recording = parse_recording(f"{json.dumps(first_line)}\n\n{json.dumps(second_line)}\n")
    first, second = recording.requests
    assert (first.method, first.target, first.headers, first.body) == (
        "POST", "/a?b=1", (("X-A", "1"), ("X-A", "2")), "é".encode()
    )  # fmt: skip
    assert second.headers == (("X-B", "3"), ("Content-Type", "application/json"))
    assert json.loads(second.body) == {"d": [1]}
    assert (first.source, second.source) == ("line 1", "line 3")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "method": st.sampled_from(["GET", "POST", "", "G ET"]) | st.integers(),
        "path": st.sampled_from(["/", "/a?b", "a", "/\n", ""]) | json_values,
        "headers": json_values,
        "body": json_values,
        "json": json_values,
        "url": st.text(max_size=5),
    },
)


@given(st.lists(request_like | json_values, max_size=4))
def test_any_json_lines_are_requests_or_one_bad_recording(lines: list[object]) -> None:
    try:
        recording = parse_recording("\n".join(json.dumps(line) for line in lines))
    except BadRecording as exc:
        assert str(exc).startswith(("line ", "not a HAR file", "entry "))
    else:
        assert all(r.target.startswith("/") for r in recording.requests)


@given(st.text(max_size=200))
def test_any_text_is_requests_or_one_bad_recording(text: str) -> None:
    with contextlib.suppress(BadRecording):
        parse_recording(text)


har_request = st.fixed_dictionaries(
    {},
    optional={
        "method": st.sampled_from(["GET", "PO ST"]) | json_values,
        "url": st.sampled_from(
            ["https://a.test/x?y", "wss://a.test/", "data:,", "/x", "http://[::1"]
        )
        | json_values,
        "headers": st.lists(st.fixed_dictionaries({"name": json_values, "value": json_values}))
        | json_values,
        "postData": st.fixed_dictionaries({}, optional={"text": json_values}) | json_values,
    },
)
har_entry = st.fixed_dictionaries(
    {"request": har_request | json_values},
    optional={"_resourceType": st.sampled_from(["fetch", "websocket"])},
)


@given(st.lists(har_entry | json_values, max_size=4) | json_values)
def test_any_har_like_document_is_requests_or_one_bad_recording(entries: object) -> None:
    try:
        recording = parse_recording(json.dumps({"log": {"entries": entries}}))
    except BadRecording as exc:
        assert str(exc).startswith(("not a HAR file", "entry "))
    else:
        assert all(r.scheme in ("http", "https") for r in recording.requests)
