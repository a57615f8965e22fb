"""gateway_kit: one durable event log behind every client of an AI-agent chat server."""

from .app_runs.guards import RunGuards
from .app_runs.owned import OwnedRun, owned_run
from .app_runs.settings import AppRunSettings
from .app_runs.sweeper import OwnedRunSweeper
from .app_runs.sweeping import SweepOwnedRuns
from .approvals import Approval, ApprovalService, ApprovalSettings
from .approvals.routes import ApprovalRoutes
from .bindings.claims import TmuxClaims
from .exceptions import (
    ApprovalClosed,
    ApprovalError,
    ApprovalExpired,
    ApprovalNotFound,
    ArgumentsChanged,
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
    TmuxSessionTaken,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamTooFarBehind,
    UpstreamUnavailable,
)
from .execution.decider import HeartbeatDecider, HeartbeatDecision
from .execution.observer import ExecutionObserver
from .execution.recorder import ExecutionRecorder
from .execution.routes import HeartbeatRoutes
from .execution.settings import ExecutionSettings
from .execution.state import ExecutionState
from .execution.tmux import Tmux, TmuxError
from .gateway import Gateway, GatewaySettings, LegacySurfaces, Part, Services
from .hooks import GuardFailure, GuardVeto, PluginContext, Plugins, RecoveryPlan, hookimpl
from .hooks.settings import PluginSettings
from .http.fallback import PrefixNotFound
from .http.lifespan import Lifespan, Work
from .http.middleware import Middleware
from .http.mount import Mount
from .http.settings import HttpSettings
from .identity.middleware import IdentityMiddleware
from .identity.owners import StreamOwners
from .identity.settings import IdentitySettings
from .identity.ticket_routes import TicketRoutes
from .log import Event, EventLog
from .principal import ANONYMOUS, Principal
from .runs import Run, RunStatus
from .runs.billing import BillingSettings
from .runs.lifecycle_settings import LifecycleSettings
from .runs.routes import RunRoutes
from .runs.settings import RunSettings
from .runs.transcript import ToolCall, final_assistant_text, tool_calls
from .sockets import PresenceRoutes, SocketServer
from .sockets.settings import SocketSettings
from .streams import LegacyTaskPoll, StreamRoutes
from .streams.settings import StreamSettings
from .streams.task_shape import PolledTask, TaskEvent, TaskPollShape
from .upstream import GooseUpstream
from .upstream.acp import AcpUpstream
from .upstream.pump_settings import PumpSettings
from .usage import UsageRoutes
from .wrapped import WrappedApp

__all__ = [
    "ANONYMOUS",
    "AcpUpstream",
    "AppRunSettings",
    "Approval",
    "ApprovalClosed",
    "ApprovalError",
    "ApprovalExpired",
    "ApprovalNotFound",
    "ApprovalRoutes",
    "ApprovalService",
    "ApprovalSettings",
    "ArgumentsChanged",
    "BillingSettings",
    "DatabaseUnavailable",
    "Event",
    "EventLog",
    "EventLogError",
    "ExecutionObserver",
    "ExecutionRecorder",
    "ExecutionSettings",
    "ExecutionState",
    "Gateway",
    "GatewayKitError",
    "GatewaySettings",
    "GooseUpstream",
    "GuardFailure",
    "GuardVeto",
    "HeartbeatDecider",
    "HeartbeatDecision",
    "HeartbeatRoutes",
    "HttpSettings",
    "IdentityMiddleware",
    "IdentitySettings",
    "InvalidCursor",
    "InvalidEvent",
    "LegacySurfaces",
    "LegacyTaskPoll",
    "LifecycleSettings",
    "Lifespan",
    "LogClosed",
    "Middleware",
    "Mount",
    "OwnedRun",
    "OwnedRunSweeper",
    "Part",
    "PayloadTooLarge",
    "PluginContext",
    "PluginError",
    "PluginSettings",
    "Plugins",
    "PolledTask",
    "PrefixNotFound",
    "PresenceRoutes",
    "Principal",
    "PumpSettings",
    "RecoveryPlan",
    "Run",
    "RunConflict",
    "RunError",
    "RunGuards",
    "RunNotFound",
    "RunRoutes",
    "RunSettings",
    "RunStatus",
    "Services",
    "SessionBusy",
    "SessionNotFound",
    "SettingsError",
    "SocketServer",
    "SocketSettings",
    "StreamOwners",
    "StreamRoutes",
    "StreamSettings",
    "SweepOwnedRuns",
    "TaskEvent",
    "TaskPollShape",
    "TicketRoutes",
    "Tmux",
    "TmuxClaims",
    "TmuxError",
    "TmuxSessionTaken",
    "ToolCall",
    "UpstreamAuthError",
    "UpstreamBadRequest",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamTimeout",
    "UpstreamTooFarBehind",
    "UpstreamUnavailable",
    "UsageRoutes",
    "Work",
    "WrappedApp",
    "final_assistant_text",
    "hookimpl",
    "owned_run",
    "tool_calls",
]
