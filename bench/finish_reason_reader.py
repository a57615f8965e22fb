"""Finish-reason reading: MB/s of `ResponseReader` over an OpenAI-style chat stream, against a
loop that only goes through the same chunks.

The execution-state observer hands every chunk of every response it watches to a
`ResponseReader`, in the request's own task, so what the reader costs is added to every
chunk the wrapped app sends. The stream is OpenAI's chat completion chunks as they are sent
(`data: {...}` with `"finish_reason":null`, about 300 bytes each, one text delta per chunk)
up to `--megabytes`, then the `"stop"` chunk and `data: [DONE]`, cut into `--chunk` bytes
(the size of a network read). The baseline iterates the same list of chunks and does
nothing with them: the physical floor, what any observer costs at the least.

Each round times both sides `--repeat` times over the whole stream (a fresh reader each
time), in an order reversed every other round; the ratio is the median of per-round ratios.
A reader that did not see the end of the stream with "stop" stops the script.

    .venv/bin/python bench/finish_reason_reader.py           # about 3 seconds
    .venv/bin/python bench/finish_reason_reader.py --rounds 9 --megabytes 8 --chunk 16384
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson
from _common import Case, print_table
from _harness import machine_load

from gateway_kit.execution.finish_reason import ResponseReader

MB = 1_000_000


def chat_chunk(i: int, content: str, reason: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-9xYzAbCdEfGhIjKlMnOpQrStUv",
        "object": "chat.completion.chunk",
        "created": 1718000000 + i // 50,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_6b68a8204b",
        "choices": [
            {"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": reason}
        ],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def openai_stream(size: int) -> bytes:
    """Chat completion chunks up to `size` bytes, then the `stop` chunk and `[DONE]`."""
    body = bytearray()
    i = 0
    while len(body) < size:
        body += chat_chunk(i, f" word{i}, and some more text of a sentence", None)
        i += 1
    return bytes(body + chat_chunk(i, "", "stop") + b"data: [DONE]\n\n")


def read_all(chunks: list[bytes], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        reader = ResponseReader("text/event-stream")
        for chunk in chunks:
            reader.feed(chunk)
        reader.end()
    seconds = time.perf_counter() - start
    if (reader.terminal, reader.finish_reason, reader.error) != (True, "stop", False):
        raise SystemExit("the reader did not see the stream end with stop")
    return seconds


def iterate_all(chunks: list[bytes], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for _chunk in chunks:
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    parser.add_argument(
        "--megabytes", type=float, default=2.0, help="size of the stream in MB (default 2)"
    )
    parser.add_argument("--chunk", type=int, default=4096, help="bytes per chunk (default 4096)")
    parser.add_argument(
        "--repeat", type=int, default=50, help="passes over the stream per side (default 50)"
    )
    args = parser.parse_args()

    body = openai_stream(int(args.megabytes * MB))
    chunks = [body[i : i + args.chunk] for i in range(0, len(body), args.chunk)]
    megabytes = len(body) * args.repeat / MB
    case = Case(f"vs iterating the chunks ({len(chunks):,} of {args.chunk:,} B)", None)
    print(
        f"{len(body) / MB:.2f} MB OpenAI-style stream in {len(chunks):,} chunks, "
        f"{args.repeat} passes per side, {args.rounds} rounds"
    )
    print(f"At the start: {machine_load()}")
    read_all(chunks, 1)  # warms the regexes, orjson and the allocator
    for rnd in range(args.rounds):
        sides = [("reader", read_all), ("loop", iterate_all)]
        if rnd % 2:
            sides.reverse()
        seconds = {name: side(chunks, args.repeat) for name, side in sides}
        case.add(megabytes / seconds["reader"], megabytes / seconds["loop"])
        print(
            f"  round {rnd + 1}/{args.rounds}: reader {case.ours[-1]:,.0f} MB/s, "
            f"loop {case.theirs[-1]:,.0f} MB/s",
            flush=True,
        )
    per_chunk = args.chunk / MB / statistics.median(case.ours) * 1e6
    case.notes.append(
        f"ratio {case.ratio:.6f}: the reader takes {1 / case.ratio:,.0f} times the loop's time, "
        f"{per_chunk:.1f} us per {args.chunk:,}-byte chunk (medians)"
    )
    print_table(
        "Finish-reason reader: ResponseReader.feed vs a loop over the same chunks",
        [case],
        "reader",
        "loop",
        unit="MB/s",
        percent=True,
    )
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
