"""`RunSettings`: what a run may be started with, and where its goose session works.

How a run goes and ends (follow-ups, deadlines, billing) is `LifecycleSettings`; how its events
are pumped from goose is `PumpSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import SettingsError
from ..settings import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_WORKING_DIR, check_count

BAD_WORKING_DIR = "RunSettings.working_dir must be a non-empty path, got {value!r}"


@dataclass(frozen=True, slots=True)
class RunSettings:
    """:param max_message_bytes: the largest message (UTF-8) a run may be started with (413
        above it, nothing written).
    :param working_dir: the working directory of the goose sessions the gateway starts.
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    working_dir: str = DEFAULT_WORKING_DIR

    def __post_init__(self) -> None:
        check_count("RunSettings.max_message_bytes", self.max_message_bytes)
        if not isinstance(self.working_dir, str) or not self.working_dir:
            raise SettingsError(BAD_WORKING_DIR.format(value=self.working_dir))
