"""The agent as a child process: started, its stderr read and logged, stopped.

The child gets the SDK's minimal environment (HOME, PATH, SHELL, TERM, USER, LOGNAME) with the
caller's `env` on top, and a process group of its own, so that stopping it also stops what it
started (an agent run through ``npx`` is a node process under a shell).

Its stderr is read line by line as long as it runs and each line is logged: a pipe nobody reads
fills at 64 KiB and the agent blocks on its next write. The last lines are kept to say why an
agent that exited did so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque

from acp import default_environment

from .errors import AcpConnectionLost
from .stdio import read_line
from .target import StdioAgent

logger = logging.getLogger(__name__)
stderr_logger = logging.getLogger("gateway_kit.upstream.acp.stderr")

# Lines of stdout are read in chunks this large; a longer message is put together from them.
READ_CHUNK_BYTES = 1 << 20
MAX_STDERR_LINE_BYTES = 8192  # longer stderr lines are logged cut
STDERR_TAIL_LINES = 10
STDERR_TAIL_CHARS = 300
CANNOT_START = "cannot start the agent {command!r}: {error}"
EXITED = "the agent process {pid} ({command}) {how}"
LAST_WORDS = "; its last lines on stderr: {lines}"


class AgentProcess:
    """One run of the agent's command. Use `spawn` to start it and `stop` to end it."""

    def __init__(self, proc: asyncio.subprocess.Process, target: StdioAgent) -> None:
        self.proc = proc
        self.target = target
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        assert proc.stderr is not None
        self._stderr = asyncio.create_task(self._log_stderr(proc.stderr), name="acp-agent-stderr")
        self.exited = asyncio.create_task(proc.wait(), name="acp-agent-wait")

    @classmethod
    async def spawn(cls, target: StdioAgent) -> AgentProcess:
        env = {**default_environment(), **target.env}
        try:
            proc = await asyncio.create_subprocess_exec(
                *target.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=target.cwd,
                env=env,
                start_new_session=True,
                limit=READ_CHUNK_BYTES,
            )
        except OSError as exc:
            raise AcpConnectionLost(
                CANNOT_START.format(command=target.describe(), error=exc)
            ) from exc
        return cls(proc, target)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def _log_stderr(self, stream: asyncio.StreamReader) -> None:
        pid = self.proc.pid
        while True:
            try:
                raw = await read_line(stream, MAX_STDERR_LINE_BYTES, cut=True)
            except (ConnectionError, ValueError):  # the pipe broke
                return
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.stderr_tail.append(line[:STDERR_TAIL_CHARS])
                stderr_logger.info("agent %s: %s", pid, line)

    def exit_text(self) -> str:
        """How the process ended (or that it still runs), with its last words on stderr."""
        code = self.proc.returncode
        if code is None:
            how = "closed its stdout"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
        else:
            how = f"exited with code {code}"
        text = EXITED.format(pid=self.pid, command=self.target.describe(), how=how)
        if self.stderr_tail:
            text += LAST_WORDS.format(lines=" | ".join(self.stderr_tail))
        return text

    async def settle(self, timeout: float) -> None:
        """Give a process whose stdout ended `timeout` seconds to exit and its stderr to be
        read."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.exited), timeout)
        if self.exited.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr), timeout)

    async def stop(self, grace: float) -> None:
        """Close its stdin and let it exit; after `grace` seconds SIGTERM, then SIGKILL, to its
        whole process group."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                self._signal_group(sig)
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), grace)
                break
            except TimeoutError:
                continue
        # What it started and left behind (a grandchild holding stderr open) goes too.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._stderr), grace)
        if not self._stderr.done():
            self._stderr.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
