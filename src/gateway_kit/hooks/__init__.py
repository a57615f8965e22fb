"""Hooks: the specifications, the markers, and the plugin manager of one gateway."""

from .context import PluginContext
from .loading import BUILT_IN, ENTRY_POINT, ENTRY_POINT_GROUP, PASSED_IN, PluginSource
from .manager import PluginInfo, Plugins
from .markers import PROJECT, hookimpl, hookspec
from .policy import REFUSED
from .results import GuardFailure, GuardVeto, RecoveryPlan

__all__ = [
    "BUILT_IN",
    "ENTRY_POINT",
    "ENTRY_POINT_GROUP",
    "PASSED_IN",
    "PROJECT",
    "REFUSED",
    "GuardFailure",
    "GuardVeto",
    "PluginContext",
    "PluginInfo",
    "PluginSource",
    "Plugins",
    "RecoveryPlan",
    "hookimpl",
    "hookspec",
]
