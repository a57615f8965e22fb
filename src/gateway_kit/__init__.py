"""gateway_kit: one durable event log behind every client of an AI-agent chat server."""

from .access import StreamOwners
from .exceptions import (
    DatabaseUnavailable,
    EventLogError,
    GatewayKitError,
    InvalidCursor,
    InvalidEvent,
    LogClosed,
    PayloadTooLarge,
    PluginError,
    RunConflict,
    RunError,
    RunNotFound,
    SessionBusy,
    SessionNotFound,
    SettingsError,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamTooFarBehind,
    UpstreamUnavailable,
)
from .gateway import Gateway
from .hooks import GuardVeto, PluginContext, Plugins, RecoveryPlan, hookimpl
from .http.fallback import PrefixNotFound
from .http.middleware import Middleware
from .http.mount import Mount
from .identity import IdentityMiddleware
from .log import Event, EventLog
from .principal import ANONYMOUS, Principal
from .runs import Run, RunStatus
from .runs.lifecycle import LifecycleSettings
from .runs.owned import OwnedRun, owned_run
from .runs.routes import RunRoutes
from .runs.sweeper import OwnedRunSweeper
from .runs.sweeping import SweepOwnedRuns
from .settings import GatewaySettings
from .sockets import PresenceRoutes, SocketServer
from .streams import LegacyTaskPoll, StreamRoutes
from .tickets import TicketRoutes
from .upstream import GooseUpstream
from .upstream.pump import PumpSettings
from .wrapped import WrappedApp

__all__ = [
    "ANONYMOUS",
    "DatabaseUnavailable",
    "Event",
    "EventLog",
    "EventLogError",
    "Gateway",
    "GatewayKitError",
    "GatewaySettings",
    "GooseUpstream",
    "GuardVeto",
    "IdentityMiddleware",
    "InvalidCursor",
    "InvalidEvent",
    "LegacyTaskPoll",
    "LifecycleSettings",
    "LogClosed",
    "Middleware",
    "Mount",
    "OwnedRun",
    "OwnedRunSweeper",
    "PayloadTooLarge",
    "PluginContext",
    "PluginError",
    "Plugins",
    "PrefixNotFound",
    "PresenceRoutes",
    "Principal",
    "PumpSettings",
    "RecoveryPlan",
    "Run",
    "RunConflict",
    "RunError",
    "RunNotFound",
    "RunRoutes",
    "RunStatus",
    "SessionBusy",
    "SessionNotFound",
    "SettingsError",
    "SocketServer",
    "StreamOwners",
    "StreamRoutes",
    "SweepOwnedRuns",
    "TicketRoutes",
    "UpstreamAuthError",
    "UpstreamBadRequest",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamTimeout",
    "UpstreamTooFarBehind",
    "UpstreamUnavailable",
    "WrappedApp",
    "hookimpl",
    "owned_run",
]
