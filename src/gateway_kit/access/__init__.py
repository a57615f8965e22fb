"""Who holds what: API tokens, stream owners and socket tickets, the rows behind identity,
subscriptions and the Socket.IO tickets. Every secret is stored as its SHA-256 only."""

from .owners import StreamOwners
from .tokens import ApiToken, ApiTokens, TokenKind

__all__ = ["ApiToken", "ApiTokens", "StreamOwners", "TokenKind"]
