"""The flat keywords `Gateway` took before `GatewaySettings`, kept working for one release.

Each one warns (`DeprecationWarning`, naming its new place) and is put where it now lives: a
field of one part's options, a part's whole options object, or a `LegacySurfaces` path. A
setting given both ways (the old keyword, and a value other than the default in its new place)
is a `SettingsError`, never a silent choice of one of them.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ..approvals.settings import ApprovalSettings
from ..exceptions import SettingsError
from ..execution.settings import ExecutionSettings
from ..runs.lifecycle_settings import LifecycleSettings
from ..settings import DEFAULT_APPROVAL_EXPIRY
from ..upstream.pump_settings import PumpSettings
from .legacy import LegacySurfaces
from .settings import GatewaySettings


class DeprecatedKeywords(TypedDict, total=False):
    """Every keyword `Gateway` no longer takes in its signature, with the type it took."""

    ping_interval: float
    queue_size: int
    max_page_bytes: int
    send_timeout: float
    max_body_bytes: int
    body_timeout: float
    wsgi_workers: int
    credential_refresh_interval: float
    credential_stale_after: float
    ticket_ttl: float
    ticket_rate: tuple[int, float]
    plugin_timeout: float
    plugin_hung_limit: int
    socket_origins: Sequence[str] | None
    socketio_redis_url: str | None
    socketio_redis_channel: str
    max_message_bytes: int
    working_dir: str
    pump_scan_interval: float
    owned_run_sweep_interval: float
    reply_timeout: float | None
    cancel_deadline: float | None
    max_run_duration: float | None
    observe_execution: bool
    pump_settings: PumpSettings | None
    lifecycle_settings: LifecycleSettings | None
    execution_settings: ExecutionSettings | None
    approval_settings: ApprovalSettings | None
    legacy_tasks_path: str | None
    legacy_usage_path: str | None
    legacy_socket_token_path: str | None
    legacy_approvals_path: str | None
    legacy_socketio_path: str | None


# keyword → (the part in GatewaySettings, the field of that part's options)
FIELDS: dict[str, tuple[str, str]] = {
    "ping_interval": ("streams", "ping_interval"),
    "queue_size": ("streams", "queue_size"),
    "max_page_bytes": ("streams", "max_page_bytes"),
    "send_timeout": ("http", "send_timeout"),
    "max_body_bytes": ("http", "max_body_bytes"),
    "body_timeout": ("http", "body_timeout"),
    "wsgi_workers": ("http", "wsgi_workers"),
    "credential_refresh_interval": ("identity", "credential_refresh_interval"),
    "credential_stale_after": ("identity", "credential_stale_after"),
    "ticket_ttl": ("identity", "ticket_ttl"),
    "ticket_rate": ("identity", "ticket_rate"),
    "plugin_timeout": ("plugins", "timeout"),
    "plugin_hung_limit": ("plugins", "hung_limit"),
    "socket_origins": ("sockets", "origins"),
    "socketio_redis_url": ("sockets", "redis_url"),
    "socketio_redis_channel": ("sockets", "redis_channel"),
    "max_message_bytes": ("runs", "max_message_bytes"),
    "working_dir": ("runs", "working_dir"),
    "pump_scan_interval": ("pumps", "scan_interval"),
    "owned_run_sweep_interval": ("app_runs", "sweep_interval"),
    "reply_timeout": ("lifecycle", "reply_timeout"),
    "cancel_deadline": ("lifecycle", "cancel_deadline"),
    "max_run_duration": ("lifecycle", "max_run_duration"),
    "observe_execution": ("execution", "observe"),
}
# keyword → the part in GatewaySettings whose whole options object it gave
WHOLE: dict[str, str] = {
    "pump_settings": "pumps",
    "lifecycle_settings": "lifecycle",
    "execution_settings": "execution",
    "approval_settings": "approvals",
}
# keyword → the `LegacySurfaces` field it gave
LEGACY: dict[str, str] = {
    "legacy_tasks_path": "tasks",
    "legacy_usage_path": "usage",
    "legacy_socket_token_path": "socket_token",
    "legacy_approvals_path": "approvals",
    "legacy_socketio_path": "socketio",
}
# Keywords whose old default was None, "as the rest says": None still gives nothing.
NONE_IS_UNSET = {"reply_timeout", "cancel_deadline", "max_run_duration", *WHOLE, *LEGACY}

DEPRECATED = "Gateway({keyword}=...) is deprecated: use {place}"
TWICE = (
    "{keyword} is given two ways: Gateway({keyword}=...) and {place}; give it in the second "
    "place alone"
)
LEGACY_TWICE = (
    "the legacy surfaces are given two ways: legacy=LegacySurfaces(...) and {names}; "
    "give them in legacy= alone"
)
UNKNOWN = "Gateway() got an unexpected keyword argument {keyword!r}"


def new_place(keyword: str) -> str:
    """Where `keyword`'s setting is given now, as code."""
    if keyword in FIELDS:
        part, name = FIELDS[keyword]
        kind = GatewaySettings.parts()[part].__name__
        return f"settings=GatewaySettings({part}={kind}({name}=...))"
    if keyword in WHOLE:
        part = WHOLE[keyword]
        kind = GatewaySettings.parts()[part].__name__
        place = f"settings=GatewaySettings({part}={kind}(...))"
        if keyword == "approval_settings":
            place += " and, for its expiry, approval_expiry=..."
        return place
    return f"legacy=LegacySurfaces({LEGACY[keyword]}=...)"


def check_known(old: Mapping[str, Any]) -> None:
    for keyword in old:
        if keyword not in FIELDS and keyword not in WHOLE and keyword not in LEGACY:
            raise TypeError(UNKNOWN.format(keyword=keyword))


def warn(old: Mapping[str, Any], *, stacklevel: int) -> None:
    """One `DeprecationWarning` per old keyword, pointing at the caller `stacklevel` up."""
    for keyword in old:
        message = DEPRECATED.format(keyword=keyword, place=new_place(keyword))
        warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)


def given(old: Mapping[str, Any], keyword: str) -> bool:
    return keyword in old and not (keyword in NONE_IS_UNSET and old[keyword] is None)


def settings_from(
    settings: GatewaySettings, approval_expiry: float, old: Mapping[str, Any]
) -> tuple[GatewaySettings, float]:
    """`settings` and `approval_expiry` with the old keywords in `old` put in their places."""
    parts: dict[str, Any] = {name: getattr(settings, name) for name in GatewaySettings.parts()}
    # Whole objects first: a flat keyword given beside one lands in it, or is refused in it.
    for keyword, part in WHOLE.items():
        if not given(old, keyword):
            continue
        options = old[keyword]
        if parts[part] != type(parts[part])():
            raise SettingsError(TWICE.format(keyword=keyword, place=new_place(keyword)))
        if keyword == "approval_settings" and options.expiry != DEFAULT_APPROVAL_EXPIRY:
            if approval_expiry != DEFAULT_APPROVAL_EXPIRY:
                place = "approval_expiry=..."
                raise SettingsError(TWICE.format(keyword="approval_settings.expiry", place=place))
            approval_expiry = options.expiry
            options = dataclasses.replace(options, expiry=DEFAULT_APPROVAL_EXPIRY)
        parts[part] = options
    for keyword, (part, name) in FIELDS.items():
        if not given(old, keyword):
            continue
        options = parts[part]
        if getattr(options, name) != getattr(type(options)(), name):
            raise SettingsError(TWICE.format(keyword=keyword, place=new_place(keyword)))
        parts[part] = dataclasses.replace(options, **{name: old[keyword]})
    return GatewaySettings(**parts), approval_expiry


def legacy_from(legacy: LegacySurfaces | None, old: Mapping[str, Any]) -> LegacySurfaces:
    """The surfaces `legacy` names, or the old `legacy_*_path` keywords do; never both."""
    paths = {LEGACY[keyword]: old[keyword] for keyword in LEGACY if given(old, keyword)}
    if legacy is None:
        return LegacySurfaces(**paths)
    if paths:
        names = ", ".join(keyword for keyword in LEGACY if given(old, keyword))
        raise SettingsError(LEGACY_TWICE.format(names=names))
    return legacy
