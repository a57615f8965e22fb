"""What the stream benchmarks share: servers and client processes, percentiles, result tables.

Every server runs alone in its own uvicorn process (`_apps.py`); clients run in processes of
their own (`_clients.py`), so neither side's work slows the other's event loop.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import Case

HERE = Path(__file__).resolve().parent
APPS_SCRIPT = HERE / "_apps.py"
CLIENTS_SCRIPT = HERE / "_clients.py"
HOST = "127.0.0.1"
START_TIMEOUT = 30.0  # seconds for a server to listen
STOP_TIMEOUT = 10.0  # seconds for a server to stop on SIGTERM before it is killed
NOFILE = 8192  # open files each process may have: 2 000 connections to one server, and more
USER = "bench"  # the legacy app's login, password the same
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class LowerIsBetter(Case):
    """A case measured in seconds (or bytes): the ratio is how many times theirs is ours."""

    @property
    def ratios(self) -> list[float]:
        return [t / o for o, t in zip(self.ours, self.theirs, strict=True)]


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of `values` (0 < pct <= 100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def raise_open_files(wanted: int = NOFILE) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))


def machine_load() -> str:
    """The load average: other work on the machine skews every absolute figure, and ratios too."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


# How the servers of `_apps.py` are run, passed to them through the environment.
STACK_VAR = "GATEWAY_KIT_BENCH_STACK"  # "standard" (what is installed) or "plain"
PLUGINS_VAR = "GATEWAY_KIT_BENCH_NOOP_PLUGINS"  # no-op plugins registered in every Gateway
DEFAULT_NOOP_PLUGINS = 10
PLAIN_STACK = {"loop": "asyncio", "http": "h11"}


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack",
        choices=("standard", "plain"),
        default="standard",
        help="uvicorn with what uvicorn[standard] installs (httptools, uvloop), or plain "
        "(h11, asyncio loop); every server of the run alike (default standard)",
    )
    parser.add_argument(
        "--noop-plugins",
        type=int,
        default=DEFAULT_NOOP_PLUGINS,
        help=f"no-op plugins registered in the Gateway (default {DEFAULT_NOOP_PLUGINS})",
    )


def apply_server_options(args: argparse.Namespace) -> None:
    """Hand the options to the server processes, which inherit the environment."""
    os.environ[STACK_VAR] = args.stack
    os.environ[PLUGINS_VAR] = str(args.noop_plugins)


def uvicorn_stack() -> dict[str, str]:
    """The loop and HTTP implementation for uvicorn.Config, as the driver chose them."""
    return dict(PLAIN_STACK) if os.environ.get(STACK_VAR) == "plain" else {}


def server_stack() -> str:
    import uvicorn  # only the driver asks

    chosen = uvicorn_stack()
    loop = chosen.get("loop") or ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    http = chosen.get("http") or ("httptools" if importlib.util.find_spec("httptools") else "h11")
    plugins = os.environ.get(PLUGINS_VAR, str(DEFAULT_NOOP_PLUGINS))
    return (
        f"uvicorn {uvicorn.__version__} (1 process, {loop} loop, {http}); "
        f"{plugins} no-op plugins in the Gateway"
    )


class Workdir:
    """A temporary directory for database files, port files and server output."""

    def __init__(self, parent: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="gk-bench-", dir=parent)
        self.path = Path(self._tmp.name)
        self._count = 0

    def new(self, label: str) -> Path:
        self._count += 1
        return self.path / f"{label}-{self._count}"

    def cleanup(self) -> None:
        self._tmp.cleanup()


class Server:
    """One `_apps.py` server in its own process: ``with Server(work, "peer") as srv: srv.url``."""

    def __init__(self, work: Workdir, kind: str, *, db: bool = False) -> None:
        self.kind = kind
        self.port_file = work.new(f"{kind}-port")
        self.output = work.new(f"{kind}-output")
        self.db_file = work.new(f"{kind}-db").with_suffix(".db") if db else None
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> Server:
        command = [sys.executable, str(APPS_SCRIPT), self.kind, str(self.port_file)]
        if self.db_file is not None:
            command.append(str(self.db_file))
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            self._wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if self.db_file is not None:
            # The next server measured must not pay for this one's disk writes: the kernel
            # writes dirty pages back up to half a minute later, and the next fsyncs wait.
            for path in self.db_file.parent.glob(self.db_file.name + "*"):
                path.unlink()
            os.sync()

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited:\n{self.log_text()}")
            with contextlib.suppress(OSError, ValueError):
                self.port = json.loads(self.port_file.read_text())["port"]
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} server did not listen:\n{self.log_text()}")

    def rss_kib(self) -> int:
        """The server's resident memory, from /proc."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def cpu_seconds(self) -> float:
        """User plus system CPU time the server has used so far, from /proc."""
        assert self.process is not None
        stat = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / CLOCK_TICKS

    def open_sockets(self) -> int:
        assert self.process is not None
        fds = Path(f"/proc/{self.process.pid}/fd")
        return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("socket:"))

    def log_text(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Clients:
    """A `_clients.py` process: it says ``ready`` on stdout, then prints one JSON result line."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.process = subprocess.Popen(
            [sys.executable, str(CLIENTS_SCRIPT), json.dumps(job)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> str:
        """The rest of the client's ``ready`` line; raises when it exits or takes too long."""
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else ""
        if not line.startswith("ready"):
            self.kill()
            raise RuntimeError(f"client {self.job['mode']} did not get ready: {line!r}")
        return line[len("ready") :].strip()

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def result(self, timeout: float = 120.0) -> dict[str, Any]:
        out, _ = self.process.communicate(timeout=timeout)
        if self.process.returncode != 0:
            raise RuntimeError(f"client {self.job['mode']} failed (exit {self.process.returncode})")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


SETTLE_SECONDS = 1.0  # RSS is read once two readings this far apart agree within 1%
SETTLE_LIMIT = 15.0


def settled_rss(server: Server) -> int:
    """The server's resident memory, KiB, once it stops moving (or after SETTLE_LIMIT)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    last = server.rss_kib()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_SECONDS)
        now = server.rss_kib()
        if abs(now - last) <= last / 100:
            return now
        last = now
    return last


SERVE_TIMEOUT = 20.0  # seconds a server in a thread may take to start or stop


@contextlib.contextmanager
def serve_in_thread(app: Any, stack: str) -> Iterator[str]:
    """uvicorn serving `app` in a thread, on a free loopback port; yields the base URL."""
    import uvicorn  # only the scripts that serve in a thread ask

    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    options: dict[str, Any] = dict(PLAIN_STACK) if stack == "plain" else {}
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise RuntimeError("uvicorn did not start")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(SERVE_TIMEOUT)
        sock.close()
