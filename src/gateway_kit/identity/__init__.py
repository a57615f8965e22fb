"""Identity: who each request is from, resolved once, before any route and the wrapped app."""

from .middleware import IdentityMiddleware

__all__ = ["IdentityMiddleware"]
