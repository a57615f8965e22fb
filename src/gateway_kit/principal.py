"""`gateway_kit.principal`: where the contract names `principal_of` and `Principal`; both live
in `gateway_kit.principal` with the rest of identity."""

from .identity.principal import PRINCIPAL_KEY, Principal, principal_of

__all__ = ["PRINCIPAL_KEY", "Principal", "principal_of"]
