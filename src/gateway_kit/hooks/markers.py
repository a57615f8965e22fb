"""The markers of gateway_kit's hooks, named after the project (pluggy's project name)."""

from __future__ import annotations

import pluggy

PROJECT = "gateway_kit"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
