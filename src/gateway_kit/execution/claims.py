"""`claims_of` and `TmuxClaims` where the heartbeat documentation imports them from; they live
in `gateway_kit.bindings.claims`, below execution, with the rest of what serves a stream."""

from ..bindings.claims import TmuxClaims, claims_of

__all__ = ["TmuxClaims", "claims_of"]
