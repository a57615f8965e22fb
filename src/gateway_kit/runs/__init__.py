"""Runs: one agent turn each, owned by the gateway, never by a client connection."""

from .model import Run, RunStatus

__all__ = ["Run", "RunStatus"]
