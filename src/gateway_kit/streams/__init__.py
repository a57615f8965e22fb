"""Serving the event log to clients: SSE, JSON pages and the legacy task poll.

Routes (under the gateway's prefix, default ``/gateway``)::

    GET {prefix}/streams/{stream}/events   SSE of a stream (or a JSON page, see below)
    GET {prefix}/runs/{run_id}/events      SSE of one run; ends after its Finish or Error
    GET /api/tasks/{task_id}?from=<idx>    the legacy poll (`gateway_kit.streams.legacy`)

SSE frames: ``id: <seq>`` and one ``data:`` line holding the envelope JSON
``{"seq","stream","pos","run_id","type","data","upstream_event_id"}``, no ``event:`` line.
``: ping`` comments keep an idle stream alive. Response headers: ``Content-Type:
text/event-stream``, ``Cache-Control: no-store, no-transform``, ``X-Accel-Buffering: no``;
never compressed.

Cursor: the ``Last-Event-ID`` header, else ``?after=<seq>``, else the start of the log. A
cursor may be sent as ``<epoch>:<seq>``. Not an integer, or negative: ``400`` with
``{"error": "invalid_cursor", "message": ...}``.

Reset: a cursor from another log (its epoch differs) or beyond this log's head would resume at
the wrong place, so the client is told to start again instead of getting a silent gap. The
first frame is then::

    id: 0
    data: {"seq":0,"stream":<stream or null>,"pos":0,"run_id":<run or null>,"type":"reset",
           "data":{"epoch":<this log's epoch>,"head":<last seq>,"reason":<why>},
           "upstream_event_id":null}

(on one line), with ``reason`` ``"epoch_mismatch"`` or ``"cursor_beyond_head"``; every event
from the start of the log follows. A client drops what it holds for the stream on a reset. Its
``id: 0`` makes a browser that reconnects right after it resume from the start too.

JSON page (``Accept: application/json``, without ``text/event-stream``):
``{"epoch","events":[envelope...],"next_after","terminal"}``, at most ``?limit=`` events
(default and cap 1000) and ending with the event whose data reaches ``max_page_bytes``; see
`gateway_kit.streams.page`. After a reset, `events` starts with the
reset envelope.

Run streams: a run's stream ends (the response completes) after its first ``Finish`` or
``Error``. A request whose cursor is already at or past that event gets ``204 No Content``, so
a browser's `EventSource` stops reconnecting. A run the log holds no event of is a 404.

Who may read: `authorize_subscription` is asked once per request (never per event), with the
stream of the request or of the run; a refusal is a 403.

Delivery: a client replays from the log, then gets live events through the process's one live
reader (`gateway_kit.streams.fanout`), with neither gap nor duplicate across the hand-over. A
client too slow to keep up (its queue is full) or whose write times out is disconnected and
resumes by cursor. When the server stops, open streams end (`gateway_kit.streams.shutdown`).
"""

from .legacy import LegacyTaskPoll
from .responder import StreamOptions
from .routes import StreamRoutes
from .service import StreamService

__all__ = ["LegacyTaskPoll", "StreamOptions", "StreamRoutes", "StreamService"]
