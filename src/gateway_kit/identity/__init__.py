"""Identity: who each request is from, resolved once, before any route and the wrapped app."""

from .flask_session import FlaskLogin, FlaskSessionReader, FlaskSessionSettings
from .middleware import IdentityMiddleware

__all__ = ["FlaskLogin", "FlaskSessionReader", "FlaskSessionSettings", "IdentityMiddleware"]
