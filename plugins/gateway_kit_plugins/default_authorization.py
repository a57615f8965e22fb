"""The default answer of `authorize_subscription`: every principal may read every stream.

Every other plugin is asked first (``trylast``); block this one
(``Gateway(block_plugins=["default_authorization"])``) and a stream nobody else allows is
refused.
"""

from __future__ import annotations

from gateway_kit import Principal, hookimpl


@hookimpl(trylast=True)
def authorize_subscription(principal: Principal, stream: str) -> bool:
    return True
