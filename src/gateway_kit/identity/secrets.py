"""Secrets handed to clients once: 256 random bits, kept only as their SHA-256."""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_BYTES = 32  # 256 bits


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def digest(secret: str) -> str:
    """What the database keeps of `secret`: a stolen table gives no usable credential, and a
    256-bit secret needs no slow hash to resist guessing."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def same_digest(secret: str, stored: str) -> bool:
    return hmac.compare_digest(digest(secret), stored)
