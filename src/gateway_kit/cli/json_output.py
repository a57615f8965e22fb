"""``--json`` for scripts: only JSON on stdout, notes on stderr.

A command that lists prints one JSON object per line (a token, a bill, a plugin, an event); a
command that does something prints one JSON object saying what it did.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

DONE_HELP = "say what was done as one JSON object (only JSON on stdout)"


def add_json_option(parser: argparse.ArgumentParser, help: str = DONE_HELP) -> None:
    parser.add_argument("--json", action="store_true", help=help)


def print_json(document: Mapping[str, Any]) -> None:
    print(json.dumps(document, ensure_ascii=False), flush=True)
