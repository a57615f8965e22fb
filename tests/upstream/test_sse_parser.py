"""The event-stream parser the pump reads goose with: the WHATWG rules, whatever the chunking."""

from __future__ import annotations

import asyncio
import json

import httpx
import respx
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit.upstream import GooseUpstream
from gateway_kit.upstream.goose.sse_parser import SSEEvent, SSEParser


def parse(*chunks: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def test_id_and_data_lines_make_an_event_at_the_blank_line() -> None:
    assert parse(b"id: 3\ndata: {}\n\n") == [SSEEvent("3", "{}")]
    assert parse(b"data: {}\n\n") == [SSEEvent("", "{}")]


def test_an_event_without_an_id_line_does_not_inherit_the_previous_one() -> None:
    assert parse(b"id: 7\ndata: a\n\ndata: b\n\n") == [SSEEvent("7", "a"), SSEEvent("", "b")]


def test_crlf_cr_and_lf_all_end_lines_even_split_across_chunks() -> None:
    expected = [SSEEvent("1", "x"), SSEEvent("2", "y")]
    assert parse(b"id: 1\r\ndata: x\r\n\r\nid: 2\r\ndata: y\r\n\r\n") == expected
    assert parse(b"id: 1\rdata: x\r\rid: 2\rdata: y\r\r") == expected
    assert parse(b"id: 1\r", b"\ndata: x\r", b"\n\r", b"\nid: 2\ndata: y\n\n") == expected


def test_unicode_line_separators_inside_json_do_not_end_a_line() -> None:
    data = '{"text":"a\u2028b\u2029c\x85d"} and \x0b \x0c \x1c \x1d \x1e'
    assert parse(f"data: {data}\n\n".encode()) == [SSEEvent("", data)]


def test_comments_bom_and_unknown_fields_are_dropped() -> None:
    stream = "\ufeff: ping 0\nevent: message\nretry: 10\nfoo: bar\ndata: x\n\n"
    assert parse(stream.encode()) == [SSEEvent("", "x")]


def test_data_lines_join_with_lf_and_one_space_only_is_dropped() -> None:
    assert parse(b"data:a\ndata:  b\ndata\n\n") == [SSEEvent("", "a\n b\n")]


def test_an_id_holding_nul_is_ignored_and_an_event_without_data_is_not_dispatched() -> None:
    assert parse(b"id: 4\x00\ndata: x\n\nid: 5\n\n") == [SSEEvent("", "x")]


def test_an_unfinished_event_at_the_end_is_not_dispatched() -> None:
    assert parse(b"data: done\n\ndata: half") == [SSEEvent("", "done")]


def test_a_character_split_between_two_chunks_is_decoded_once_whole() -> None:
    encoded = 'data: "\u00e9\u2014\U0001f600"\n\n'.encode()
    assert parse(*[encoded[i : i + 1] for i in range(len(encoded))]) == [
        SSEEvent("", '"\u00e9\u2014\U0001f600"')
    ]


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    assert parse(b"data: a\xffb\n\n") == [SSEEvent("", "a\ufffdb")]


# Lines as goose and others write them: a field, a comment, or the blank line ending an event.
FIELDS = st.sampled_from(["data", "id", "event", "retry", "", "x"])
VALUES = st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12
)
LINES = st.one_of(
    st.builds(lambda f, sep, v: f + sep + v, FIELDS, st.sampled_from([":", ": ", ""]), VALUES),
    st.builds(lambda v: ":" + v, VALUES),
    st.just(""),
)
ENDINGS = st.sampled_from(["\n", "\r", "\r\n"])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(LINES, ENDINGS), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_chunking_and_any_line_ending_give_the_same_events(
    lines: list[tuple[str, str]], cuts: list[int]
) -> None:
    """Where a network read splits the stream never changes the events: the reference is the
    stream parsed whole, its line endings written as LF."""
    text = "".join(line + ending for line, ending in lines)
    body = text.encode()
    reference = parse(text.replace("\r\n", "\n").replace("\r", "\n").encode())
    points = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert parse(*chunks) == reference


def test_goose_frames_keep_unicode_line_separators_through_the_client() -> None:
    payload = {"type": "Message", "text": "one\u2028two\x85three", "chat_request_id": "r"}
    body = f"id: 1\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

    async def main() -> None:
        with respx.mock(base_url="http://goose.test") as mock:
            mock.get("/sessions/s/events").respond(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
            async with httpx.AsyncClient() as client:
                upstream = GooseUpstream("http://goose.test", secret_key="k", client=client)
                async with upstream.events("s", None) as frames:
                    received = [frame async for frame in frames]
        assert [(f.id, f.data) for f in received] == [(1, payload)]

    asyncio.run(main())
