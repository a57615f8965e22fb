"""Reading a file of recorded requests: a HAR file or JSON lines, told apart by content.

A HAR file is one JSON object with ``log.entries``; anything else is read as JSON lines. The
whole file is read and checked before anything is replayed: a file with one bad request is
refused whole, naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .har import read_har
from .jsonlines import read_json_lines
from .recorded import BadRecording, Recorded

CANNOT_READ = "cannot read {path}: {error}"
NOT_TEXT = "cannot read {path}: it is not UTF-8 text"
NOTHING_TO_REPLAY = "{path} holds no request to replay"
HAR = "HAR"
JSON_LINES = "JSON lines"


@dataclass(frozen=True, slots=True)
class Recording:
    """The requests of one file, in order; `skipped` counts what was left out, by reason."""

    requests: list[Recorded]
    kind: str
    skipped: dict[str, int] = field(default_factory=dict)


def read_recording(path: str | Path) -> Recording:
    """The requests `path` holds; `BadRecording` when it cannot be read or holds a bad one."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise BadRecording(CANNOT_READ.format(path=path, error=exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise BadRecording(NOT_TEXT.format(path=path)) from None
    recording = parse_recording(text)
    if not recording.requests:
        raise BadRecording(NOTHING_TO_REPLAY.format(path=path))
    return recording


def parse_recording(text: str) -> Recording:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None  # several lines of JSON, or a mistake that reading by line will name
    if isinstance(document, dict) and "log" in document:
        requests, skipped = read_har(document)
        return Recording(requests, HAR, skipped)
    return Recording(read_json_lines(text), JSON_LINES)
