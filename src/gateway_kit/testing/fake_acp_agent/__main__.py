"""``python -m gateway_kit.testing.fake_acp_agent [--state-dir DIR] [--no-load-session]``: the
fake ACP agent on this process's stdin and stdout, as ``goose acp`` runs."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import cast

import acp
from acp.interfaces import Agent

from .agent import FakeAcpAgent
from .sessions import SessionStore


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gateway_kit.testing.fake_acp_agent")
    parser.add_argument("--state-dir", type=Path, help="keep sessions in this folder")
    parser.add_argument("--no-load-session", action="store_true", help="do not offer session/load")
    args = parser.parse_args(argv)
    agent = FakeAcpAgent(
        store=SessionStore(args.state_dir), load_session=not args.no_load_session, stdio=True
    )
    asyncio.run(acp.run_agent(cast(Agent, agent)))


if __name__ == "__main__":
    main()
