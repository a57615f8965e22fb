"""Comparing two answers: what counts as a difference, and how each is named."""

from __future__ import annotations

from gateway_kit.adopt.call import MAX_BODY, TIMEOUT, Answer
from gateway_kit.adopt.compare import differences

JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream")]


def described(app: Answer, gateway: Answer) -> list[str]:
    return [difference.describe() for difference in differences(app, gateway)]


def test_the_servers_headers_are_not_compared_and_the_apps_are() -> None:
    app = Answer(200, [("Date", "Wed, 01 May 2024 10:00:00 GMT"), ("Server", "gunicorn"),
                       ("Content-Length", "2"), ("X-Frame-Options", "DENY")], b"ok")  # fmt: skip
    gateway = Answer(200, [("date", "Thu, 02 May 2024 11:00:00 GMT"), ("server", "uvicorn"),
                           ("transfer-encoding", "chunked"), ("cache-control", "no-store")],
                     b"ok")  # fmt: skip
    assert described(app, gateway) == [
        "header x-frame-options: DENY → (none)",
        "header cache-control: (none) → no-store",
    ]


def test_cookies_are_compared_by_name_with_long_values_masked() -> None:
    app = Answer(200, [("set-cookie", "session=Wq3x9RkT0aZb7yLmN2cVd8fH; HttpOnly; Path=/"),
                       ("set-cookie", "theme=dark; Path=/")])  # fmt: skip
    other_session = "session=Zx81kQ2mL0pRt5YvB7nCw3aE; HttpOnly; Path=/"
    same = Answer(200, [("set-cookie", "theme=dark; Path=/"), ("set-cookie", other_session)])
    assert described(app, same) == []
    changed = Answer(200, [("set-cookie", "session=Zx81kQ2mL0pRt5YvB7nCw3aE; Path=/"),
                           ("set-cookie", "theme=dark; Path=/")])  # fmt: skip
    assert described(app, changed) == [
        "header set-cookie session: session=<value>; HttpOnly; Path=/ → session=<value>; Path=/"
    ]


def test_json_bodies_differ_by_json_pointer_whatever_their_spacing_and_key_order() -> None:
    app = Answer(200, JSON, b'{"a/b": {"c~d": [1, 2]}, "n": 1, "flag": true, "gone": 0}')
    gateway = Answer(200, JSON, b'{"flag": 1, "n": 1.0, "a/b": {"c~d": [1, 3, 4]}, "new": "x"}')
    assert described(app, gateway) == [
        "body at /a~1b/c~0d/1: 2 → 3",
        "body at /a~1b/c~0d/2: (none) → 4",
        "body at /flag: true → 1",
        "body at /gone: 0 → (none)",
        'body at /new: (none) → "x"',
    ]


def test_past_five_differences_the_rest_are_counted() -> None:
    app = Answer(200, JSON, b"[1, 2, 3, 4, 5, 6, 7]")
    gateway = Answer(200, JSON, b"[0, 0, 0, 0, 0, 0, 0]")
    found = described(app, gateway)
    assert found[:4] == [f"body at /{i}: {i + 1} → 0" for i in range(4)]
    assert found[4:] == ["… and 3 more differences in the body"]


def test_status_and_a_changed_line_of_text() -> None:
    app = Answer(200, [("content-type", "text/html")], b"<p>\n<b>Hello</b>\n</p>")
    gateway = Answer(403, [("content-type", "text/html")], b"<p>\n<b>Hi</b>\n</p>")
    assert described(app, gateway) == ["status: 200 → 403", "body line 2: <b>Hello</b> → <b>Hi</b>"]


def test_streams_read_in_part_are_compared_on_the_whole_lines_both_read() -> None:
    app = Answer(200, SSE, b"data: 1\n\ndata: 2\n\ndata: 3\n\nda", cut=TIMEOUT)
    longer = Answer(200, SSE, b"data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: 5", cut=TIMEOUT)
    assert described(app, longer) == []
    other = Answer(200, SSE, b"data: 1\n\ndata: 9\n", cut=MAX_BODY)
    assert described(app, other) == ["body line 3: data: 2 → data: 9"]


def test_an_answer_that_ended_against_one_cut_short_is_a_difference() -> None:
    app = Answer(200, SSE, b"data: 1\n\n" * 500, cut=TIMEOUT)
    gateway = Answer(200, SSE, b"data: 1\n\n")
    assert described(app, gateway) == [
        "end: read 4.4 KB of a stream (--timeout reached) → whole, 9 bytes"
    ]


def test_binary_bodies_are_compared_byte_for_byte() -> None:
    png = [("content-type", "image/png")]
    assert described(Answer(200, png, b"\x89PNG\xff\x00"), Answer(200, png, b"\x89PNG\xfe")) == [
        "body byte 5: 6 bytes → 5 bytes"
    ]


def test_no_answer_and_an_error_are_named() -> None:
    failed = Answer(500, error="RuntimeError: boom")
    assert described(Answer(None, cut=TIMEOUT), failed) == [
        "status: no answer → 500",
        "error: (none) → RuntimeError: boom",
    ]
