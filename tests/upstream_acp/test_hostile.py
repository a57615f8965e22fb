"""An agent that floods its stderr, writes garbage or huge lines, never answers, or is not
there: each ends in a clear error, never a hang."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from gateway_kit.testing.fake_acp_agent import AcpScript
from gateway_kit.upstream.acp import AcpConnectionLost, AcpProtocolError, AcpUpstream
from tests.upstream_acp.agents import QUICK_RESTARTS, fake_agent, run_turn, texts

STDERR_LOGGER = "gateway_kit.upstream.acp.stderr"


def test_a_flood_on_stderr_does_not_block_the_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=STDERR_LOGGER)
    flood = 300 * 1024  # a pipe nobody reads blocks its writer at 64 KiB

    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            script = (
                AcpScript()
                .stderr(flood, line=1024)
                .text("still talking")
                .stderr(200_000, line=200_000)
            )
            events, end = await run_turn(upstream, session.id, script.prompt())
            assert texts(events) == ["still talking"]
            assert end.event.data["reason"] == "end_turn"

    asyncio.run(main())
    logged = [r for r in caplog.records if r.name == STDERR_LOGGER]
    assert len(logged) >= flood // 1024  # every line, one record each
    assert max(len(r.getMessage()) for r in logged) < 10_000  # a huge line is cut


@pytest.mark.parametrize(
    ("garbage", "said"),
    [
        ("this is not JSON at all\n", "not JSON-RPC on its stdout: 'this is not JSON at all'"),
        ("[1, 2, 3]\n", "a JSON value that is not a JSON-RPC message on its stdout: '[1, 2, 3]'"),
        ('{"jsonrpc": "2.0", "method": "session/upda', "not JSON-RPC on its stdout"),
    ],
    ids=["text", "not-an-object", "cut-short"],
)
def test_garbage_on_stdout_ends_the_turn_with_a_protocol_error(
    tmp_path: Path, garbage: str, said: str
) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path, **QUICK_RESTARTS) as upstream:
            session = await upstream.new_session()
            broken = upstream.pid
            script = AcpScript().text("ok").stdout(garbage).crash(0).hang()
            events, end = await run_turn(upstream, session.id, script.prompt())
            assert [e.type for e in events] == ["Message", "Error"]
            assert isinstance(end.error, AcpProtocolError)
            assert said in end.event.data["error"]
            # The broken agent is replaced; the session goes on in the next one.
            _, again = await run_turn(upstream, session.id, "hello")
            assert again.event.data["reason"] == "end_turn"
            assert upstream.pid != broken

    asyncio.run(main())


def test_a_line_longer_than_the_limit_ends_the_turn_with_a_protocol_error(tmp_path: Path) -> None:
    limit = 1024 * 1024

    async def main() -> None:
        async with fake_agent(tmp_path, max_message_bytes=limit, **QUICK_RESTARTS) as upstream:
            session = await upstream.new_session()
            fits = AcpScript().big_text(limit // 2).prompt()
            events, _ = await run_turn(upstream, session.id, fits)
            assert len(texts(events)[0]) == limit // 2
            too_long = AcpScript().text("before").big_text(3 * limit).hang().prompt()
            events, end = await run_turn(upstream, session.id, too_long)
            assert [e.type for e in events] == ["Message", "Error"]
            assert isinstance(end.error, AcpProtocolError)
            assert f"a line of more than {limit} bytes" in end.event.data["error"]

    asyncio.run(main())


def test_an_agent_that_never_answers_initialize_is_not_waited_for(tmp_path: Path) -> None:
    silent = "import time; time.sleep(120)"

    async def main() -> None:
        upstream = AcpUpstream(command=[sys.executable, "-c", silent], start_timeout=1.0)
        try:
            with pytest.raises(AcpConnectionLost, match="did not answer initialize within 1 s"):
                await upstream.start()
        finally:
            await upstream.aclose()

    asyncio.run(main())


def test_a_program_that_is_not_there_is_said_so(tmp_path: Path) -> None:
    async def main() -> None:
        upstream = AcpUpstream(command=[str(tmp_path / "no-such-agent"), "acp"])
        try:
            with pytest.raises(AcpConnectionLost, match="cannot start the agent") as failed:
                await upstream.start()
            assert "No such file or directory" in str(failed.value)
        finally:
            await upstream.aclose()

    asyncio.run(main())
