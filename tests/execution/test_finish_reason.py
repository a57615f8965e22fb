"""Reading whether an agent's response ended, and why, from its bytes as they pass."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit.execution.finish_reason import ResponseReader

SSE = "text/event-stream"
JSON = "application/json"

# What a reader learnt: (terminal, finish_reason, error).
Outcome = tuple[bool, "str | None", bool]


def read(
    body: bytes | Sequence[bytes],
    content_type: str | None = SSE,
    *,
    max_line_bytes: int = 64 * 1024,
    max_json_bytes: int = 1024 * 1024,
) -> Outcome:
    chunks = [body] if isinstance(body, bytes) else body
    reader = ResponseReader(
        content_type, max_line_bytes=max_line_bytes, max_json_bytes=max_json_bytes
    )
    for chunk in chunks:
        reader.feed(chunk)
    reader.end()
    return reader.terminal, reader.finish_reason, reader.error


def crlf(body: bytes) -> bytes:
    return body.replace(b"\n", b"\r\n")


def cr(body: bytes) -> bytes:
    return body.replace(b"\n", b"\r")


# --- the wire formats, as the servers write them

CHUNK_HEAD = (
    b'data: {"id":"chatcmpl-9xYz","object":"chat.completion.chunk","created":1718000000,'
    b'"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_6b68a8204b","choices":'
)

OPENAI_STOP = (
    CHUNK_HEAD + b'[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},'
    b'"logprobs":null,"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{"content":"! How can I help?"},"logprobs":null,'
    b'"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n'
    + CHUNK_HEAD
    + b'[],"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}\n\n'
    b"data: [DONE]\n\n"
)

OPENAI_TOOL_CALLS = (
    CHUNK_HEAD + b'[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":'
    b'[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":'
    b'{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,'
    b'"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"'
    b'location\\":\\"Paris\\"}"}}]},"logprobs":null,"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)

OPENAI_LENGTH = (
    CHUNK_HEAD + b'[{"index":0,"delta":{"role":"assistant","content":"Once upon"},'
    b'"logprobs":null,"finish_reason":null}]}\n\n'
    + CHUNK_HEAD
    + b'[{"index":0,"delta":{"content":" a time"},"logprobs":null,"finish_reason":"length"}]}'
    b"\n\ndata: [DONE]\n\n"
)


def named_events(*events: tuple[str, dict[str, object]], spaced: bool = False) -> bytes:
    """`event: <name>` and `data: <json>` per event, the JSON compact or with spaces."""
    separators = (", ", ": ") if spaced else (",", ":")
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data, separators=separators)}\n\n".encode()
        for name, data in events
    )


def message_start(model: str) -> tuple[str, dict[str, object]]:
    message = {
        "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 472, "output_tokens": 2},
    }
    return "message_start", {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, object]) -> tuple[str, dict[str, object]]:
    start = {"type": "content_block_start", "index": index, "content_block": block}
    return "content_block_start", start


def block_delta(index: int, delta: dict[str, object]) -> tuple[str, dict[str, object]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> tuple[str, dict[str, object]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def message_delta(reason: str) -> tuple[str, dict[str, object]]:
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": 89},
    }
    return "message_delta", delta


MESSAGE_STOP = ("message_stop", {"type": "message_stop"})

ANTHROPIC_TOOL_USE = named_events(
    message_start("claude-sonnet-4-20250514"),
    block_start(0, {"type": "text", "text": ""}),
    ("ping", {"type": "ping"}),
    block_delta(0, {"type": "text_delta", "text": "Let me check the weather."}),
    block_stop(0),
    block_start(1, {"type": "tool_use", "id": "toolu_01T1", "name": "get_weather", "input": {}}),
    block_delta(1, {"type": "input_json_delta", "partial_json": '{"location": "San Fra'}),
    block_delta(1, {"type": "input_json_delta", "partial_json": 'ncisco, CA"}'}),
    block_stop(1),
    message_delta("tool_use"),
    MESSAGE_STOP,
)

ANTHROPIC_END_TURN = named_events(
    message_start("claude-opus-4-20250514"),
    block_start(0, {"type": "text", "text": ""}),
    block_delta(0, {"type": "text_delta", "text": "Hello"}),
    block_stop(0),
    message_delta("end_turn"),
    MESSAGE_STOP,
    spaced=True,
)

ANTHROPIC_ERROR = named_events(
    message_start("claude-sonnet-4-20250514"),
    (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ),
    spaced=True,
)

GOOSE_MESSAGE = (
    b'{"type":"Message","message":{"id":"msg_7","role":"assistant","created":1718000000,'
    b'"content":[{"type":"text","text":"Done: the tests pass."}],"metadata":{"userVisible":true,'
    b'"agentVisible":true}},"token_state":{"inputTokens":1200,"outputTokens":40,"totalTokens":1240,'
    b'"accumulatedInputTokens":1200,"accumulatedOutputTokens":40,"accumulatedTotalTokens":1240},'
    b'"chat_request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10",'
    b'"request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10"}'
)
GOOSE_FINISH = (
    b'{"type":"Finish","reason":"stop","token_state":{"inputTokens":1200,"outputTokens":40,'
    b'"totalTokens":1240,"accumulatedInputTokens":1200,"accumulatedOutputTokens":40,'
    b'"accumulatedTotalTokens":1240},"chat_request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10",'
    b'"request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10"}'
)
GOOSE_ERROR = (
    b'{"type":"Error","error":"Session not found",'
    b'"chat_request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10",'
    b'"request_id":"0b6f4c52-0f0e-4f43-9f0a-3c1f5f6b7a10"}'
)
GOOSE_FINISHED = (
    b": ping 0\n\nid: 41\ndata: " + GOOSE_MESSAGE + b"\n\n: ping 1\n\n"
    b"id: 42\ndata: " + GOOSE_MESSAGE + b"\n\nid: 43\ndata: " + GOOSE_FINISH + b"\n\n"
)

RESPONSES_HEAD = (
    b"event: response.created\n"
    b'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9",'
    b'"object":"response","created_at":1741290958,"status":"in_progress","error":null,'
    b'"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[]}}\n\n'
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9",'
    b'"output_index":0,"content_index":0,"delta":"Hi"}\n\n'
)


def responses_end(kind: str, status: str, output: list[object], details: object = None) -> bytes:
    response = {
        "id": "resp_67c9",
        "object": "response",
        "created_at": 1741290958,
        "status": status,
        "error": None,
        "incomplete_details": details,
        "model": "gpt-4.1-2025-04-14",
        "output": output,
    }
    event = {"type": kind, "sequence_number": 9, "response": response}
    return f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()


TEXT_ITEM = {
    "type": "message",
    "id": "msg_67c9",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
}
CALL_ITEM = {
    "type": "function_call",
    "id": "fc_12345",
    "call_id": "call_12345",
    "name": "get_weather",
    "arguments": '{"location":"Paris"}',
    "status": "completed",
}

OPENAI_JSON = json.dumps(
    {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        }
                    ],
                    "refusal": None,
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
    },
    indent=2,
).encode()

ANTHROPIC_JSON = json.dumps(
    {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [{"type": "text", "text": "Hi! My name is Claude."}],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 2095, "output_tokens": 503},
    }
).encode()

OPENAI_ERROR_JSON = (
    b'{\n  "error": {\n    "message": "Rate limit reached for gpt-4o",\n'
    b'    "type": "requests",\n    "param": null,\n    "code": "rate_limit_exceeded"\n  }\n}\n'
)
ANTHROPIC_ERROR_JSON = (
    b'{"type":"error","error":{"type":"not_found_error","message":"The requested resource '
    b'could not be found."},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}'
)
HTML_PAGE = (
    b"<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
    b"<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was "
    b'unable to complete your request. {"finish_reason":"stop"} data: [DONE]</p>\n'
)

STREAMS: list[tuple[str, bytes, Outcome]] = [
    ("openai stop", OPENAI_STOP, (True, "stop", False)),
    ("openai tool_calls", OPENAI_TOOL_CALLS, (True, "tool_calls", False)),
    ("openai length", OPENAI_LENGTH, (True, "length", False)),
    ("anthropic tool_use", ANTHROPIC_TOOL_USE, (True, "tool_calls", False)),
    ("anthropic end_turn", ANTHROPIC_END_TURN, (True, "stop", False)),
    ("anthropic error", ANTHROPIC_ERROR, (True, None, True)),
    ("goose Finish", GOOSE_FINISHED, (True, "stop", False)),
    ("goose Error", b"id: 5\ndata: " + GOOSE_ERROR + b"\n\n", (True, None, True)),
    (
        "responses completed",
        RESPONSES_HEAD + responses_end("response.completed", "completed", [TEXT_ITEM]),
        (True, "stop", False),
    ),
    (
        "responses function_call",
        RESPONSES_HEAD + responses_end("response.completed", "completed", [TEXT_ITEM, CALL_ITEM]),
        (True, "tool_calls", False),
    ),
    (
        "responses incomplete",
        RESPONSES_HEAD
        + responses_end(
            "response.incomplete", "incomplete", [TEXT_ITEM], {"reason": "max_output_tokens"}
        ),
        (True, "length", False),
    ),
    (
        "responses failed",
        RESPONSES_HEAD + responses_end("response.failed", "failed", []),
        (True, None, True),
    ),
]
BODIES = [body for _, body, _ in STREAMS]


@pytest.mark.parametrize(
    ("body", "expected"), [(b, e) for _, b, e in STREAMS], ids=[name for name, _, _ in STREAMS]
)
def test_each_stream_style_is_read_to_its_end_and_reason(body: bytes, expected: Outcome) -> None:
    assert read(body) == expected


@pytest.mark.parametrize("ending", [crlf, cr], ids=["crlf", "cr"])
@pytest.mark.parametrize(
    ("body", "expected"), [(b, e) for _, b, e in STREAMS], ids=[name for name, _, _ in STREAMS]
)
def test_crlf_and_cr_line_endings_read_alike(
    body: bytes, expected: Outcome, ending: Callable[[bytes], bytes]
) -> None:
    assert read(ending(body)) == expected


def test_a_crlf_split_between_two_chunks_ends_one_line_only() -> None:
    # Counted twice, the LF would be a blank line ending the event after its first line.
    body = b'data: {"type":"Finish",\r\ndata: "reason":"stop"}\r\n\r\n'
    cut = body.index(b"\n")
    assert read([body[:cut], body[cut:]]) == (True, "stop", False)
    assert read([body[: cut + 1], body[cut + 1 :]]) == (True, "stop", False)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (OPENAI_JSON, JSON, (True, "tool_calls", False)),
        (ANTHROPIC_JSON, "application/json; charset=utf-8", (True, "length", False)),
        (OPENAI_ERROR_JSON, JSON, (True, None, True)),
        (ANTHROPIC_ERROR_JSON, JSON, (True, None, True)),
        (
            json.dumps({"object": "response", "status": "completed", "output": [CALL_ITEM]}),
            JSON,
            (True, "tool_calls", False),
        ),
    ],
    ids=["openai", "anthropic", "openai error", "anthropic error", "responses"],
)
def test_json_responses_tell_their_reason_once_complete(
    body: bytes | str, content_type: str, expected: Outcome
) -> None:
    data = body.encode() if isinstance(body, str) else body
    reader = ResponseReader(content_type)
    reader.feed(data)
    assert not reader.terminal
    reader.end()
    assert (reader.terminal, reader.finish_reason, reader.error) == expected


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (HTML_PAGE, "text/html; charset=utf-8"),
        (b'data: {"finish_reason":"stop"}\n\n', "text/plain"),
        (OPENAI_STOP, None),
        (b'{"message":"Session already has an active request. Cancel it first."}', JSON),
        (b'{"choices": "stop", "type": "message"}', JSON),
        (b'["error", {"finish_reason": "stop"}]', JSON),
        (b'{"error": null, "status": "ok"}', JSON),
        (b'{"truncated": ', JSON),
        (HTML_PAGE, SSE),
        (HTML_PAGE, JSON),
    ],
    ids=[
        "html",
        "plain text",
        "no content type",
        "goose error message",
        "odd shapes",
        "json array",
        "null error",
        "cut json",
        "html sent as sse",
        "html sent as json",
    ],
)
def test_other_bodies_tell_nothing(body: bytes, content_type: str | None) -> None:
    assert read(body, content_type) == (False, None, False)


ENDS = [
    b'"finish_reason":"',
    b"event: message_stop",
    b"event: error",
    b'"type":"Finish"',
    b'"type":"Error"',
    b"event: response.completed",
    b"event: response.incomplete",
    b"event: response.failed",
]


@pytest.mark.parametrize("body", BODIES, ids=[name for name, _, _ in STREAMS])
def test_a_stream_cut_before_its_end_is_not_terminal(body: bytes) -> None:
    end = min(at for mark in ENDS if (at := body.find(mark)) >= 0)
    event_start = body.rfind(b"\n\n", 0, end) + 2
    assert read(body[:event_start])[0] is False
    assert read(body[:end])[0] is False
    assert read(body)[0] is True


def test_anthropic_gives_its_reason_before_its_end() -> None:
    cut = ANTHROPIC_TOOL_USE[: ANTHROPIC_TOOL_USE.index(b"event: message_stop")]
    assert read(cut) == (False, "tool_calls", False)


def test_an_event_ends_only_at_its_blank_line() -> None:
    assert read(b"data: [DONE]\n") == (False, None, False)
    assert read(b"data: [DONE]") == (False, None, False)


def test_words_about_an_end_inside_an_answer_are_not_its_end() -> None:
    quoted = json.dumps(
        {"choices": [{"delta": {"content": '{"finish_reason":"stop"} data: [DONE]'}}]}
    )
    goose = json.dumps(
        {
            "type": "Message",
            "message": {"content": [{"type": "text", "text": '{"type":"Finish"} [DONE]'}]},
        }
    )
    body = f"data: {quoted}\n\ndata: {goose}\n\n: [DONE]\nid: [DONE]\ndata: x\n\n".encode()
    assert read(body) == (False, None, False)


def test_data_lines_of_one_event_are_joined() -> None:
    body = b'data: {"type":"Finish",\ndata: "reason":\ndata: "stop"}\n\n'
    assert read(body) == (True, "stop", False)


def test_a_leading_bom_is_dropped_even_split() -> None:
    body = b"\xef\xbb\xbfdata: [DONE]\n\n"
    assert read(body) == (True, None, False)
    assert read([body[:1], body[1:2], body[2:]]) == (True, None, False)


def test_anthropic_reasons_are_normalized_and_others_pass_through() -> None:
    def delta(reason: str) -> bytes:
        data = {"type": "message_delta", "delta": {"stop_reason": reason}}
        return f"event: message_delta\ndata: {json.dumps(data)}\n\n".encode()

    stop = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    words = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "pause_turn": "pause_turn",
        "refusal": "refusal",
    }
    for word, normal in words.items():
        assert read(delta(word) + stop) == (True, normal, False)


def test_the_first_reason_of_a_stream_is_kept() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":null},'
        b'{"index":1,"delta":{},"finish_reason":"length"}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    assert read(body) == (True, "length", False)


def test_an_error_in_an_openai_stream_is_an_error() -> None:
    body = (
        CHUNK_HEAD + b'[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
        b'data: {"error": {"message": "The server had an error", "type": "server_error"}}\n\n'
    )
    assert read(body) == (True, None, True)


def test_after_its_end_a_stream_is_no_longer_read() -> None:
    reader = ResponseReader(SSE)
    reader.feed(b"data: " + GOOSE_FINISH + b"\n\ndata: " + GOOSE_ERROR + b"\n\ndata: x")
    reader.feed(b"data: " + GOOSE_ERROR + b"\n\n")
    assert (reader.terminal, reader.finish_reason, reader.error) == (True, "stop", False)
    assert reader.buffered == 0


def test_the_reader_is_made_from_asgi_headers() -> None:
    headers = [(b"Content-Type", b"text/event-stream; charset=utf-8"), (b"x-a", b"b")]
    reader = ResponseReader.for_headers(headers)
    assert reader.streaming
    reader.feed(OPENAI_STOP)
    assert (reader.terminal, reader.finish_reason) == (True, "stop")

    json_reader = ResponseReader.for_headers([(b"content-type", b"application/json")])
    assert not json_reader.streaming
    json_reader.feed(OPENAI_JSON)
    json_reader.end()
    assert json_reader.finish_reason == "tool_calls"


def test_a_compressed_body_tells_nothing() -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")]
    reader = ResponseReader.for_headers(headers)
    assert not reader.streaming
    reader.feed(gzip.compress(OPENAI_STOP))
    reader.end()
    assert (reader.terminal, reader.finish_reason, reader.error) == (False, None, False)
    assert reader.buffered == 0


def test_an_overlong_line_is_dropped_with_its_event_and_the_next_one_is_read() -> None:
    padding = "x" * 2000
    long_finish = f'data: {{"type":"Finish","reason":"length","pad":"{padding}"}}\n\n'.encode()
    body = long_finish + b"data: " + GOOSE_FINISH + b"\n\n"
    assert read(body, max_line_bytes=1024) == (True, "stop", False)
    assert read([body[i : i + 100] for i in range(0, len(body), 100)], max_line_bytes=1024) == (
        True,
        "stop",
        False,
    )
    assert read(body) == (True, "length", False)


def test_an_event_whose_data_lines_pass_the_bound_is_ignored() -> None:
    lines = [b'{"type":"Finish","reason":"length",']
    lines += [b'"p%d":"%s",' % (i, b"y" * 300) for i in range(5)]
    lines.append(b'"end":1}')
    long_event = b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    body = long_event + b"data: " + GOOSE_FINISH + b"\n\n"
    assert read(body) == (True, "length", False)
    assert read(body, max_line_bytes=1024) == (True, "stop", False)


def test_a_json_body_past_its_bound_tells_nothing_and_is_not_held() -> None:
    reader = ResponseReader(JSON, max_json_bytes=100)
    reader.feed(ANTHROPIC_JSON[:80])
    assert reader.buffered == 80
    reader.feed(ANTHROPIC_JSON[80:])
    assert reader.buffered == 0
    reader.end()
    assert (reader.terminal, reader.finish_reason, reader.error) == (False, None, False)


# --- whatever the bytes and however they are cut

TOKENS = [
    b"data: ",
    b"data:",
    b"data",
    b"event: error",
    b"event: message_stop",
    b"event:",
    b": ping",
    b"id: 3",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"[DONE]",
    b"\xef\xbb\xbf",
    b'{"type":"Finish","reason":"stop"}',
    b'{"type":"Error","error":"x"}',
    b'{"type":"message_delta","delta":{"stop_reason":"tool_use"}}',
    b'{"type":"message_stop"}',
    b'{"choices":[{"finish_reason":"length"}]}',
    b'{"choices":[{"finish_reason":null}]}',
    b'{"error":{"message":"x"}}',
    b'{"type":"response.completed","response":{"output":[{"type":"function_call"}]}}',
    b'{"type":"response.incomplete","response":{}}',
    b'{"finish_reason": "',
    b'"stop_reason":"',
    b'"}',
    b"{",
    b"}",
    b"\xff\xfe",
    b"\x00",
    b"\xe2\x80\xa8",
]
BODY = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=40).map(b"".join),
    st.sampled_from(BODIES).map(lambda body: body.replace(b"\n", b"\r\n")),
    st.sampled_from([*BODIES, OPENAI_JSON, ANTHROPIC_JSON, OPENAI_ERROR_JSON]),
    st.binary(max_size=300),
)
CUTS = st.lists(st.integers(min_value=0, max_value=6000), max_size=12)
LIMITS = st.sampled_from([16, 48, 200, 1000, 64 * 1024])
TYPES = st.sampled_from([SSE, JSON, "text/html", None])


def cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


@settings(max_examples=400, deadline=None)
@given(body=BODY, cuts=CUTS, limit=LIMITS, content_type=TYPES)
def test_any_chunking_of_any_bytes_reads_alike_and_holds_at_most_the_bound(
    body: bytes, cuts: list[int], limit: int, content_type: str | None
) -> None:
    """No bytes raise, where the network splits a body never changes what is read, and the
    reader never holds more than its bound."""
    reader = ResponseReader(content_type, max_line_bytes=limit, max_json_bytes=limit)
    for chunk in cut(body, cuts):
        reader.feed(chunk)
        assert reader.buffered <= limit
    reader.end()
    outcome = (reader.terminal, reader.finish_reason, reader.error)
    whole = read(body, content_type, max_line_bytes=limit, max_json_bytes=limit)
    assert outcome == whole
    assert outcome == read(
        [body[i : i + 1] for i in range(len(body))],
        content_type,
        max_line_bytes=limit,
        max_json_bytes=limit,
    )


@settings(max_examples=200, deadline=None)
@given(size=st.integers(min_value=0, max_value=5000), cuts=CUTS, limit=LIMITS)
def test_a_line_of_any_length_is_held_only_up_to_the_bound(
    size: int, cuts: list[int], limit: int
) -> None:
    finish_line = b'data: {"type":"Finish","reason":"length","pad":"' + b"z" * size + b'"}'
    body = finish_line + b"\n\ndata: " + GOOSE_FINISH + b"\n\n"
    reader = ResponseReader(SSE, max_line_bytes=limit)
    for chunk in cut(body, cuts):
        reader.feed(chunk)
        assert reader.buffered <= limit
    # A line longer than the bound is dropped with its event; the next event is still read.
    if len(finish_line) <= limit:
        expected: tuple[bool, str | None] = (True, "length")
    elif len(b"data: " + GOOSE_FINISH) <= limit:
        expected = (True, "stop")
    else:
        expected = (False, None)
    assert (reader.terminal, reader.finish_reason) == expected
