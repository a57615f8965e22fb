"""Socket tickets over HTTP: one-time tickets for Socket.IO connections, any number per user."""

from .routes import TicketRoutes

__all__ = ["TicketRoutes"]
