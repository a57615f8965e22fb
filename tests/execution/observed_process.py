"""One gateway process around the agent API, for multi-process tests.

    python -m tests.execution.observed_process PORT_FILE DB_URL RELEASE_FILE

Serves `Gateway` (anonymous allowed) around `agent_api`, whose streams go on once RELEASE_FILE
exists; open requests of a process that died end with it after 2 s. No pane is read: the
traffic of the session's holder decides alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gateway_kit import EventLog, Gateway, GatewaySettings
from gateway_kit.execution.settings import ExecutionSettings
from tests.support.processes import serve_app

from .agent_api import agent_api, file_pace

PROCESS_TTL = 2.0


def main() -> None:
    port_file, db_url, release_file = sys.argv[1:4]
    log = EventLog(db_url)
    gateway = Gateway(
        agent_api(file_pace(Path(release_file))),
        log=log,
        allow_anonymous=True,
        load_entry_points=False,
        block_plugins=("tmux_pane",),
        settings=GatewaySettings(execution=ExecutionSettings(process_ttl=PROCESS_TTL)),
    )
    serve_app(gateway, port_file)


if __name__ == "__main__":
    main()
