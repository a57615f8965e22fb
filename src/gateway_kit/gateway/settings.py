"""`GatewaySettings`: everything tunable of a `Gateway`, one options object per part.

Each part's options are defined beside the part (`StreamSettings` in ``gateway_kit.streams``,
`PumpSettings` in ``gateway_kit.upstream``, ...) and checked when they are made: a value that
cannot work is a `SettingsError` naming it, at start-up, never a request's surprise. Every
setting has one place; docs/settings.md lists them all. What is not a tuning but a choice of
what the gateway is (its prefix, the plugins, the legacy surfaces, anonymous access, the
approval expiry of the contract) is an argument of `Gateway` itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import cast

from ..app_runs.settings import AppRunSettings
from ..approvals.settings import ApprovalSettings
from ..exceptions import SettingsError
from ..execution.settings import ExecutionSettings
from ..hooks.settings import PluginSettings
from ..http.settings import HttpSettings
from ..identity.settings import IdentitySettings
from ..runs.lifecycle_settings import LifecycleSettings
from ..runs.settings import RunSettings
from ..settings import DEFAULT_APPROVAL_EXPIRY
from ..sockets.settings import SocketSettings
from ..streams.settings import StreamSettings
from ..upstream.pump_settings import PumpSettings

NOT_OPTIONS = "GatewaySettings.{name} must be a {kind}, got {value!r}"
EXPIRY_HERE = (
    "GatewaySettings(approvals=ApprovalSettings(expiry=...)): a gateway's approval expiry is "
    "Gateway(approval_expiry=...); leave ApprovalSettings.expiry as it is"
)


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """The tunables of a `Gateway`, one object per part; each defaults to the part's defaults.

    :param streams: how streams are served to clients (`StreamSettings`).
    :param http: request bodies, writes to clients, the WSGI app's threads (`HttpSettings`).
    :param identity: credential refreshes, socket tickets (`IdentitySettings`).
    :param sockets: Socket.IO's origins and shared state (`SocketSettings`).
    :param plugins: plugin timeouts (`PluginSettings`).
    :param runs: what a run may be started with, where goose works (`RunSettings`).
    :param lifecycle: how runs go and end (`LifecycleSettings`).
    :param pumps: how goose's events are read (`PumpSettings`).
    :param app_runs: the runs the app writes itself (`AppRunSettings`).
    :param execution: execution states and heartbeat decisions (`ExecutionSettings`).
    :param approvals: how approvals are delivered (`ApprovalSettings`; their expiry is
        ``Gateway(approval_expiry=...)``).
    """

    streams: StreamSettings = field(default_factory=StreamSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    identity: IdentitySettings = field(default_factory=IdentitySettings)
    sockets: SocketSettings = field(default_factory=SocketSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    runs: RunSettings = field(default_factory=RunSettings)
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    pumps: PumpSettings = field(default_factory=PumpSettings)
    app_runs: AppRunSettings = field(default_factory=AppRunSettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    approvals: ApprovalSettings = field(default_factory=ApprovalSettings)

    def __post_init__(self) -> None:
        for name, kind in self.parts().items():
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise SettingsError(NOT_OPTIONS.format(name=name, kind=kind.__name__, value=value))
        if self.approvals.expiry != DEFAULT_APPROVAL_EXPIRY:
            raise SettingsError(EXPIRY_HERE)

    @classmethod
    def parts(cls) -> dict[str, type]:
        """Each part's name here, and the class of its options."""
        # Every field's default factory is its options class.
        return {part.name: cast(type, part.default_factory) for part in fields(cls)}
