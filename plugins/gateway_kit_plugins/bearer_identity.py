"""Principals from ``Authorization: Bearer gk_...`` API tokens (method ``bearer``).

Tokens are made with ``gateway-kit tokens create USER [--scope S]`` and stored hashed
(`gateway_kit.identity.tokens.ApiTokens`), and checked from this process's memory of them, which
reads what changed every half second: a revoked one is refused within that, in every process
(`DatabaseUnavailable` when that memory could not be read for too long). A Bearer value that is not
such a token is left to the other resolvers, and refused (401) when none takes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway_kit import Principal, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.http.request import header
from gateway_kit.identity.tokens import ApiTokens, TokenKind
from gateway_kit.principal import BEARER_METHOD
from gateway_kit.types import Scope

SCHEME = "bearer "


def bearer_token(scope: Scope) -> str | None:
    value = header(scope, b"authorization")
    if value is None or value[: len(SCHEME)].lower() != SCHEME:
        return None
    return value[len(SCHEME) :].strip() or None


class BearerIdentity:
    """Tokens of `KIND` sent as Bearer tokens, answered as principals of `METHOD`."""

    KIND = TokenKind.API
    METHOD = BEARER_METHOD

    def __init__(self) -> None:
        self.tokens: ApiTokens | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        if context.log is not None:
            self.tokens = ApiTokens(context.log)

    def admits(self, scope: Scope) -> bool:
        """Whether a request may present a token of this kind at all."""
        return True

    @hookimpl(trylast=True)
    def resolve_principal(self, scope: Scope) -> Principal | None:
        token = bearer_token(scope)
        if token is None or self.tokens is None or not token.startswith(self.KIND.prefix + "_"):
            return None
        if not self.admits(scope):
            return None  # refused: the Authorization header is then invalid (401)
        found = self.tokens.checked(token, self.KIND)
        if found is None:
            return None
        return Principal(
            user_id=found.user_id,
            method=self.METHOD,
            credential_id=found.token_id,
            scopes=found.scopes,
        )
