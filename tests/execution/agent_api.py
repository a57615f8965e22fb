"""A legacy Flask app that answers agents as an LLM proxy does: OpenAI-style chat completions,
whole or streamed, the stream paced by the test.

``POST /v1/chat/completions`` takes ``{"stream": bool, "finish_reason": str}``. A streamed
answer sends one chunk, then waits until the test lets it go on (`Pace`), then the chunk with
the finish_reason and ``[DONE]``. The view returns its generator at once: its ``finally`` runs
long before the stream's last byte, as the legacy server's executor did.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from flask import Flask, Response, request

PACE_TIMEOUT = 30.0


def chunk(reason: str | None) -> bytes:
    choice = {"index": 0, "delta": {"content": "..."}, "finish_reason": reason}
    return (
        b"data: "
        + json.dumps({"object": "chat.completion.chunk", "choices": [choice]}).encode()
        + b"\n\n"
    )


class Pace:
    """What the test sees of the app and lets it do: views that returned, a stream's
    first chunk sent, the go-ahead for the rest."""

    def __init__(self, go: Callable[[], bool] | None = None) -> None:
        self.view_returned = threading.Event()
        self.first_sent = threading.Event()
        self.finished = threading.Event()
        self._go = threading.Event()
        self._check = go or self._go.is_set

    def release(self) -> None:
        self._go.set()

    def wait_for_go(self) -> None:
        """Until the test lets the stream go on (at most `PACE_TIMEOUT`, so that a failed test
        leaves no thread behind)."""
        deadline = time.monotonic() + PACE_TIMEOUT
        while not self._check() and time.monotonic() < deadline:
            self._go.wait(0.01)


def file_pace(release_file: Path) -> Pace:
    """A pace another process releases, by creating `release_file`."""
    return Pace(go=release_file.exists)


def agent_api(pace: Pace) -> Flask:
    app = Flask(__name__)

    @app.post("/v1/chat/completions")
    def completions() -> Response | dict[str, object]:
        body = request.get_json(force=True)
        reason = body.get("finish_reason", "stop")
        try:
            if not body.get("stream"):
                return {"choices": [{"index": 0, "finish_reason": reason, "message": {}}]}

            def generate() -> Iterator[bytes]:
                yield chunk(None)
                pace.first_sent.set()
                pace.wait_for_go()
                yield chunk(reason)
                yield b"data: [DONE]\n\n"
                pace.finished.set()

            return Response(generate(), mimetype="text/event-stream")
        finally:
            pace.view_returned.set()

    @app.get("/status")
    def status() -> dict[str, object]:
        return {"ok": True}

    return app
