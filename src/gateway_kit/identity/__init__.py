"""Identity: who each request is from, and what each credential may do.

The principal and its resolution (`principal`, `middleware`, `flask_session`, `logout`), the
credentials behind it (`tokens`, `logins`, `credentials`), who owns each stream (`owners`), and
one-time Socket.IO tickets (`tickets`, `ticket_routes`). Importing this package imports none of
them: the principal sits low in the layers, the middleware above the hooks.
"""
