"""Identity: who each request is from, and what each credential may do.

Resolving the principal (`middleware`, `admission`, `flask_session`, `logout`), the
credentials behind it (`tokens`, `logins`, `credentials`), who owns each stream (`owners`), and
one-time Socket.IO tickets (`tickets`, `ticket_routes`). `Principal` itself lives lower, in
`gateway_kit.principal`, so that the hooks and the HTTP helpers name it without importing
identity. Importing this package imports none of its modules.
"""
