"""A bounded, byte-level scan of a `text/event-stream` body for the few events that matter.

An observer of a response passing by must not hold it, and most of its events (every token
of an answer) cannot tell whether the answer is over. So this scanner hands back only the
events with a line matching one of its patterns, and holds at most `max_event_bytes` of the
body: the unfinished line plus the data lines of the event being read. A line that would
pass that bound is dropped up to its end and the event it belongs to is ignored.

The pump's `gateway_kit.upstream.goose.sse_parser` is not reused: it decodes every byte to text,
builds every event, and holds a line or an event of any length, which suits a client that
wants every event of a trusted upstream, not an observer of any response at full speed.
Here a whole chunk with no match is skipped at C speed (a regex search per pattern, one
`rfind`): only the lines after its last blank line, the start of an event that may go on in
the next chunk, are read one by one.

The WHATWG event-stream rules kept: lines ended by CRLF, LF or CR (a CRLF split across two
chunks is one line end), one leading BOM dropped, `:` comments, one space after the colon
dropped, `data` lines joined with LF, a blank line dispatching, an event with no data not
dispatched, an unfinished event at the end of the body discarded. Deviations: bytes are not
decoded (a field name is ASCII; the data is handed back as bytes), and `id` and `retry` are
not read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

BOM = b"\xef\xbb\xbf"


class ScannedEvent(NamedTuple):
    """A dispatched event with a marked line: its `event:` field (b"" when none) and data."""

    name: bytes
    data: bytes


class SSEScanner:
    # The event being read (see `_reset`).
    _name: bytes
    _data: list[bytes]
    _size: int  # bytes of the lines in `_data`, as they came
    _marked: bool  # a line of this event matched a pattern
    _ignored: bool  # a line of this event passed the bound

    def __init__(self, marks: Sequence[re.Pattern[bytes]], max_event_bytes: int) -> None:
        # No pattern of `marks` may match across a line end: a match is looked for in whole
        # chunks (lines joined by LF) and in single lines, and both must find the same ones.
        self._marks = marks
        self._max = max_event_bytes
        self._started = False  # whether the start of the body (a possible BOM) has been seen
        self._after_cr = False  # the last chunk ended with CR: a leading LF completes a CRLF
        self._dropping = False  # the unfinished line passed the bound: skip to its end
        self._line = b""  # the unfinished line
        self._reset()

    @property
    def buffered(self) -> int:
        """Bytes of the body held now: never more than `max_event_bytes`."""
        return len(self._line) + self._size

    def feed(self, chunk: bytes) -> list[ScannedEvent]:
        """The events `chunk` completed that have a line matching a pattern, in order."""
        if not chunk:
            return []
        if self._after_cr:
            self._after_cr = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._after_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._dropping:
            end = chunk.find(b"\n")
            if end < 0:
                return []
            self._dropping = False
            chunk = chunk[end + 1 :]
        text = self._line + chunk if self._line else chunk
        if not self._started:
            if len(text) < len(BOM) and b"\n" not in text:
                self._keep(text)
                return []
            self._started = True
            if text.startswith(BOM):
                text = text[len(BOM) :]
        last = text.rfind(b"\n")
        if last < 0:
            self._keep(text)
            return []
        events: list[ScannedEvent] = []
        start = 0
        if not self._marked and not self._matches(text, last):
            # Nothing here matters: only the lines after the last blank line, an event that
            # may still get a marked line, are read.
            blank = text.rfind(b"\n\n", 0, last + 1)
            if blank >= 0:
                start = blank + 2
            elif text.startswith(b"\n"):
                start = 1
            if start:
                self._reset()
        if start <= last:
            self._read_lines(text[start:last].split(b"\n"), events)
        self._keep(text[last + 1 :])
        return events

    def _read_lines(self, lines: list[bytes], events: list[ScannedEvent]) -> None:
        for line in lines:
            if not line:
                if self._data and self._marked:
                    events.append(ScannedEvent(self._name, b"\n".join(self._data)))
                self._reset()
                continue
            if self._ignored:
                continue
            if self._size + len(line) > self._max:
                self._ignore()
                continue
            if line.startswith(b"data:"):
                value = line[6:] if line.startswith(b"data: ") else line[5:]
            elif line == b"data":
                value = b""
            elif line.startswith(b"event:"):
                self._name = line[7:] if line.startswith(b"event: ") else line[6:]
                if self._matches(line, len(line)):
                    self._marked = True
                continue
            else:  # a comment, `id`, `retry`, `event` alone, or a field nobody knows
                continue
            self._data.append(value)
            self._size += len(line)
            if not self._marked and self._matches(value, len(value)):
                self._marked = True

    def _matches(self, text: bytes, end: int) -> bool:
        return any(mark.search(text, 0, end) for mark in self._marks)

    def _keep(self, line: bytes) -> None:
        """Hold the unfinished `line`, or start dropping it when it would pass the bound."""
        if self._size + len(line) > self._max:
            self._line = b""
            self._dropping = True
            self._ignore()
        else:
            self._line = line

    def _reset(self) -> None:
        """Start a new event."""
        self._name = b""
        self._data = []
        self._size = 0
        self._marked = False
        self._ignored = False

    def _ignore(self) -> None:
        self._data = []
        self._size = 0
        self._marked = False
        self._ignored = True
