"""The example that `gateway-kit demo` runs: a legacy-style Flask app wrapped by `Gateway`,
with a simulated goose as the gateway's upstream.

`create_app` is the Flask app (login with a session cookie, ``POST /api/tasks`` running a fake
agent turn in a background thread, the ``GET /api/tasks/<id>?from=<idx>`` poll, and a page
showing a conversation's live events, where goose runs are started and cancelled too).
`build_demo` wraps it, its events in an `EventLog`, its runs going to a `SimulatedGoose` that
the gateway reaches in-process; `build_gateway` is that `Gateway` alone.
``examples/flask_legacy`` in the source tree shows the same app adopting gateway_kit step by step.
"""

from __future__ import annotations

from .app import create_app
from .gateway import DemoApp, build_demo, build_gateway
from .goose import SimulatedGoose

__all__ = ["DemoApp", "SimulatedGoose", "build_demo", "build_gateway", "create_app"]
