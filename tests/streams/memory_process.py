"""A gateway process for the memory tests: anonymous reads of the log at DB_URL.

    python -m tests.streams.memory_process PORT_FILE DB_URL

Serves the gateway's own routes only (no wrapped app, no upstream) on a free loopback port
(written to PORT_FILE), with the default settings: what is measured is what a deployment gets.
"""

from __future__ import annotations

import sys

from gateway_kit import EventLog, Gateway
from tests.support.processes import serve_app


def main() -> None:
    port_file, db_url = sys.argv[1:3]
    serve_app(Gateway(None, log=EventLog(db_url), allow_anonymous=True), port_file)


if __name__ == "__main__":
    main()
