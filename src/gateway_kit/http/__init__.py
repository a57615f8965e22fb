"""What every route of the stack shares: the request object, routing, bodies and JSON errors."""
