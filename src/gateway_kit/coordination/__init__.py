"""Coordination between processes, below runs, upstream and Socket.IO: leases in the database
(one holder at a time, kept alive while held) and periodic background work."""
