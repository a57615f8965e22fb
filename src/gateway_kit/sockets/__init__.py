"""Socket.IO: one-time tickets at connect, per-stream subscriptions, presence."""

from .routes import PresenceRoutes
from .server import SocketServer

__all__ = ["PresenceRoutes", "SocketServer"]
