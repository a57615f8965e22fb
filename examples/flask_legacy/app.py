"""The legacy app, before gateway_kit: ``flask --app app run`` serves it on its own.

Its code is `gateway_kit.demo.app` (it ships inside the package, so that `gateway-kit demo` runs
it from an installed wheel): login with a session cookie, ``POST /api/tasks`` running a fake
agent turn in a background thread, and ``GET /api/tasks/<id>?from=<idx>`` answered from each
task's in-memory deque: lost on restart, one process only, clients polling every 250 ms.
"""

from __future__ import annotations

from gateway_kit.demo import create_app

app = create_app()
