"""`AppRunSettings`: how the runs the app writes itself (`owned_run`) are looked after."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import DEFAULT_OWNED_RUN_SWEEP_INTERVAL, check_seconds


@dataclass(frozen=True, slots=True)
class AppRunSettings:
    """How often each gateway process looks after the app's runs.

    :param sweep_interval: seconds between each process's looks for runs the app writes
        itself whose process died; they are ended with an `Error`.
    """

    sweep_interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL

    def __post_init__(self) -> None:
        check_seconds("AppRunSettings.sweep_interval", self.sweep_interval)
