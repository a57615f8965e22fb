"""The agent process supervised: started at first use, restarted with backoff when it dies,
its sessions loaded again, stopped with the gateway."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway_kit.testing.fake_acp_agent import AcpScript
from gateway_kit.upstream.acp import (
    AcpConnectionLost,
    AcpSessionLost,
    AcpTurn,
    AcpUpdate,
    AcpUpstream,
)
from tests.support.waiting import until
from tests.upstream_acp.agents import (
    QUICK_RESTARTS,
    TURN_TIMEOUT,
    agent_command,
    fake_agent,
    run_turn,
    texts,
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_agent_killed_mid_turn_ends_it_with_an_error_and_comes_back(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path, **QUICK_RESTARTS) as upstream:
            assert upstream.pid is None  # nothing runs before it is needed
            session = await upstream.new_session()
            first = upstream.pid
            assert first is not None
            await run_turn(upstream, session.id, AcpScript().text("remember me").prompt())
            events: list[Any] = []
            turn = AcpTurn(upstream, session.id, emit=events.append)
            running = asyncio.create_task(turn.run(AcpScript().text("half").hang().prompt()))
            await until(lambda: events)
            os.kill(first, signal.SIGKILL)
            end = await asyncio.wait_for(running, TURN_TIMEOUT)
            assert [e.type for e in events] == ["Message", "Error"]
            assert "was killed by SIGKILL" in end.event.data["error"]
            assert isinstance(end.error, AcpConnectionLost)
            # Restarted after a pause, not at once.
            await until(lambda: upstream.pid not in (None, first))
            restart = upstream.supervisor.history[-1]
            assert "SIGKILL" in restart.reason and restart.pause > 0
            connection = await upstream.connection()
            assert connection.opened_at - restart.at >= restart.pause
            # The same session goes on: loaded again, its history replayed but not the turn's.
            replayed: list[AcpUpdate] = []
            stop = upstream.listen(session.id, replayed.append)
            nxt, again = await run_turn(upstream, session.id, "go on")
            stop()
            assert again.event.data["reason"] == "end_turn"
            assert "".join(texts(nxt)) == "go on"
            history = [u.update for u in replayed if u.replay]
            assert "remember me" in str(history)
            live = [u for u in replayed if not u.replay]
            assert len(live) == len(nxt) - 1  # the turn took every live update, nothing else

    asyncio.run(main())


def test_a_restarted_gateway_continues_the_session_without_its_history_again(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            await run_turn(upstream, session.id, AcpScript().text("first answer").prompt())
        # A new gateway process, a new agent process: the session is the same one.
        replayed: list[AcpUpdate] = []
        async with fake_agent(tmp_path) as upstream:
            upstream.listen(session.id, replayed.append)
            events, end = await run_turn(upstream, session.id, "second")
            assert texts(events) == ["second"]
            assert end.event.data["reason"] == "end_turn"
            history = [u.update for u in replayed if u.replay]
            assert [u["sessionUpdate"] for u in history] == [
                "user_message_chunk",
                "agent_message_chunk",
            ]
            assert history[1]["content"]["text"] == "first answer"

    asyncio.run(main())


def test_an_agent_without_session_load_cannot_continue_a_session_after_a_restart(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path, "--no-load-session", **QUICK_RESTARTS) as upstream:
            session = await upstream.new_session()
            first = upstream.pid
            assert first is not None
            os.kill(first, signal.SIGKILL)
            await until(lambda: upstream.pid not in (None, first))
            _, end = await run_turn(upstream, session.id, "hello")
            assert isinstance(end.error, AcpSessionLost)
            assert "does not offer session/load" in end.event.data["error"]
            fresh = await upstream.new_session()
            _, works = await run_turn(upstream, fresh.id, "hello")
            assert works.event.data["reason"] == "end_turn"

    asyncio.run(main())


def test_a_crash_loop_is_restarted_with_growing_pauses(tmp_path: Path) -> None:
    crash = "import sys; sys.stderr.write('no provider configured\\n'); sys.exit(3)"

    async def main() -> None:
        upstream = AcpUpstream(command=[sys.executable, "-c", crash], **QUICK_RESTARTS)
        try:
            with pytest.raises(AcpConnectionLost) as failed:
                await upstream.start()
            assert "exited with code 3" in str(failed.value)
            assert "no provider configured" in str(failed.value)
            history = upstream.supervisor.history
            await until(lambda: len(history) >= 4, timeout=30)
            pauses = [restart.pause for restart in history[:4]]
            assert pauses == sorted(pauses) and pauses[2] > pauses[0]
            assert all(p <= QUICK_RESTARTS["max_restart_delay"] for p in pauses)
            for before, after in itertools.pairwise(history[:4]):
                assert after.at - before.at >= before.pause
        finally:
            await upstream.aclose()

    asyncio.run(main())


def test_a_crash_mid_turn_says_how_the_agent_exited(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path, **QUICK_RESTARTS) as upstream:
            session = await upstream.new_session()
            script = AcpScript().text("bye").stderr(100).crash(7)
            events, end = await run_turn(upstream, session.id, script.prompt())
            assert [e.type for e in events] == ["Message", "Error"]
            assert "exited with code 7" in end.event.data["error"]
            _, again = await run_turn(upstream, session.id, "again")
            assert again.event.data["reason"] == "end_turn"

    asyncio.run(main())


def test_closing_the_upstream_stops_the_agent_and_fails_the_turn_in_flight(tmp_path: Path) -> None:
    async def main() -> None:
        upstream = AcpUpstream(command=agent_command(tmp_path))
        session = await upstream.new_session()
        pid = upstream.pid
        assert pid is not None and alive(pid)
        events: list[Any] = []
        turn = AcpTurn(upstream, session.id, emit=events.append)
        running = asyncio.create_task(turn.run(AcpScript().text("x").ignore_cancel().prompt()))
        await until(lambda: events)
        await upstream.aclose()
        end = await asyncio.wait_for(running, TURN_TIMEOUT)
        assert "the gateway is shutting down" in end.event.data["error"]
        assert not alive(pid)
        assert upstream.pid is None
        with pytest.raises(AcpConnectionLost, match="shutting down"):
            await upstream.new_session()

    asyncio.run(main())
