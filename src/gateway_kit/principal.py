"""`Principal`: who a request is from, resolved once per request by the identity stage.

It sits low in the layers, below the hooks and the HTTP helpers that hand it around, so that
every part can name it without importing identity's resolvers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .types import Scope

# Where the identity stage leaves the principal in the ASGI scope, for every later part.
PRINCIPAL_KEY = "gateway_kit.principal"
ANONYMOUS_METHOD = "anonymous"
COOKIE_METHOD = "cookie"
BEARER_METHOD = "bearer"
HOST_METHOD = "host"
# The scope of operators: they read every tmux session's heartbeat, whoever holds it.
OPERATOR_SCOPE = "operator"


@dataclass(frozen=True, slots=True)
class Principal:
    """A user and the credential that proved it.

    :param user_id: the user.
    :param method: how it was proved: ``cookie``, ``bearer``, ``host``, ``anonymous`` or a
        plugin's own word.
    :param credential_id: the credential (token id, session id), so that revoking it can end
        what it opened; None where there is none.
    :param scopes: what the credential allows.
    :param csrf_token: for a credential a browser sends by itself (a cookie), the token that
        unsafe requests to the gateway must carry in their CSRF header; None means such a
        request is refused. Unused for the other methods.
    """

    user_id: str
    method: str
    credential_id: str | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)
    csrf_token: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.user_id, str) or not self.user_id:
            raise ValueError(f"user_id must be a non-empty string, got {self.user_id!r}")
        if not isinstance(self.method, str) or not self.method:
            raise ValueError(f"method must be a non-empty string, got {self.method!r}")
        if not isinstance(self.scopes, frozenset):
            object.__setattr__(self, "scopes", frozenset(_strings(self.scopes)))

    @property
    def anonymous(self) -> bool:
        return self.method == ANONYMOUS_METHOD

    @property
    def operator(self) -> bool:
        """Whether this principal runs the gateway (its credential has the ``operator`` scope,
        or it is ``anonymous``, allowed everything)."""
        return OPERATOR_SCOPE in self.scopes or self.anonymous

    @property
    def sent_by_browser(self) -> bool:
        """Whether a browser attaches this credential by itself, so that another site could
        make it send a request: such requests must prove they come from our pages (CSRF)."""
        return self.method == COOKIE_METHOD


def _strings(values: Iterable[str]) -> Iterable[str]:
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"scopes must be strings, got {value!r}")
        yield value


ANONYMOUS = Principal(user_id="anonymous", method=ANONYMOUS_METHOD)


def principal_of(scope: Scope) -> Principal | None:
    """The principal the identity stage put in `scope`, or None when no stage ran."""
    principal = scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None
