"""Coordination between processes, below runs, upstream and Socket.IO: leases in the database
(one holder at a time, kept alive while held by a `LeaseKeeper`), periodic background work, and
the background tasks a part keeps until it stops (`TaskSet`)."""
