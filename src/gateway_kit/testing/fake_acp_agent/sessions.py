"""The fake agent's sessions: their mode and history, kept in files when given a folder.

goose keeps its sessions in a database, so that a restarted ``goose acp`` can load a session
an earlier process made; with `directory` the fake does the same (one JSON file a session), and
a test can kill it and load the session from the next process. Ids look like goose's:
the date and a counter (``20261207_3``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

DEFAULT_MODE = "auto"  # goose's default: no permission is asked
MODES = ("auto", "approve", "smart_approve", "chat")


@dataclass
class FakeSession:
    id: str
    cwd: str
    mode: str = DEFAULT_MODE
    history: list[dict[str, Any]] = field(default_factory=list)  # updates a load replays
    active: str | None = None  # the run id of the prompt running
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "cwd": self.cwd, "mode": self.mode, "history": self.history}


class SessionStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._sessions: dict[str, FakeSession] = {}
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def create(self, cwd: str) -> FakeSession:
        prefix = f"{date.today():%Y%m%d}_"
        taken = set(self._sessions)
        if self.directory is not None:
            taken |= {path.stem for path in self.directory.glob("*.json")}
        number = 1 + sum(1 for session_id in taken if session_id.startswith(prefix))
        session = FakeSession(f"{prefix}{number}", cwd)
        self._sessions[session.id] = session
        self.save(session)
        return session

    def get(self, session_id: str) -> FakeSession | None:
        session = self._sessions.get(session_id)
        if session is None and self.directory is not None:
            path = self.directory / f"{session_id}.json"
            if path.parent == self.directory and path.is_file():
                saved = json.loads(path.read_text())
                session = FakeSession(saved["id"], saved["cwd"], saved["mode"], saved["history"])
                self._sessions[session_id] = session
        return session

    def save(self, session: FakeSession) -> None:
        if self.directory is not None:
            path = self.directory / f"{session.id}.json"
            path.write_text(json.dumps(session.to_json()))
