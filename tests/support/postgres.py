"""The suite's PostgreSQL: the shared server at $GATEWAY_KIT_TEST_PG (`PG_URL`), and a throwaway
server a test may kill and start again: Debian's PostgreSQL 15 (`initdb`, `pg_ctl`) in a
temporary directory, on a free loopback port of its own, trust auth, no fsync.

`initdb` refuses to run as root, so as root the server runs as the ``postgres`` OS user, in a
directory that user owns. Missing binaries or user are a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

PG_URL = os.environ.get("GATEWAY_KIT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BIN_DIRS = ("/usr/lib/postgresql/15/bin",)
OS_USER = "postgres"
START_TIMEOUT = 30.0
# Without fsync a start and a crash cost little; a crash of the server (not of the machine)
# still loses no commit. (synchronous_commit stays on: off, a crash loses the last commits.)
SETTINGS = (
    "fsync=off",
    "full_page_writes=off",
    "listen_addresses=127.0.0.1",
    "unix_socket_directories=",
    "max_connections=200",
)


def _binary(name: str) -> str:
    for directory in BIN_DIRS:
        candidate = Path(directory) / name
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    assert found is not None, f"{name} (PostgreSQL 15's server binaries) is not installed"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgServer:
    """One server: `start`, `kill` (SIGKILL of the postmaster, as a crash), `stop`, `url`."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.log_file = root / "server.log"
        self._as_user = os.geteuid() == 0
        self._initdb = _binary("initdb")
        self._pg_ctl = _binary("pg_ctl")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = list(command)
        if self._as_user:
            argv = ["runuser", "-u", OS_USER, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert not check or done.returncode == 0, f"{command}:\n{done.stderr}\n{self.output()}"
        return done

    def init(self) -> None:
        if self._as_user:
            user = pwd.getpwnam(OS_USER)  # KeyError: no such user, a failure
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run(self._initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")  # fmt: skip

    def start(self) -> None:
        """Start on the same port and data directory; returns once it accepts connections."""
        options = " ".join([f"-p {self.port}", *(f"-c {s}" for s in SETTINGS)])
        self._run(self._pg_ctl, "-D", str(self.data), "-l", str(self.log_file), "-o", options,
                  "-w", "-t", str(int(START_TIMEOUT)), "start")  # fmt: skip
        self.wait_accepting()

    def wait_accepting(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with psycopg.connect(self.conninfo, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                assert time.monotonic() < deadline, self.output()
                time.sleep(0.02)

    def postmaster_pid(self) -> int | None:
        pid_file = self.data / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(pid_file.read_text().splitlines()[0])
        return None

    def kill(self) -> None:
        """Crash it: SIGKILL to the postmaster; returns once it refuses connections and its
        children are gone (so that it can start again on the same data directory)."""
        pid = self.postmaster_pid()
        assert pid is not None, "the server is not running"
        children = _children(pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + START_TIMEOUT
        # Without their postmaster the backends exit by themselves; a stuck one is killed.
        while any(_alive(p) for p in (pid, *children)):
            if time.monotonic() > deadline:
                for child in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
            time.sleep(0.01)
        # A dead postmaster may linger as a zombie nobody reaps, which a new one would take
        # for a running server: its lock file goes with it.
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        self._run(self._pg_ctl, "-D", str(self.data), "-m", "immediate", "stop", check=False)

    def running(self) -> bool:
        try:
            with psycopg.connect(self.conninfo, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def output(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_file.read_text(errors="replace")
        return ""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state != "Z"
    return False


@contextlib.contextmanager
def pg_server() -> Iterator[PgServer]:
    """A new server, started; stopped and deleted afterwards."""
    root = Path(tempfile.mkdtemp(prefix="gk-pg-"))
    server = PgServer(root, free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
