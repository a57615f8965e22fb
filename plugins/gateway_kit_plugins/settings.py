"""Reading a built-in plugin's settings: each is checked, and a setting it does not know is
refused (a misspelt one would otherwise be ignored without a word)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def check_known(config: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}; known: {sorted(known)}")


def flag(config: Mapping[str, Any], name: str, default: bool) -> bool:
    value = config.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def word(config: Mapping[str, Any], name: str, default: str) -> str:
    value = config.get(name, default)
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ValueError(f"{name} must be a non-empty name without blanks around it, got {value!r}")
    return value


def count(config: Mapping[str, Any], name: str, default: int, *, least: int) -> int:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")
    return value


def seconds(config: Mapping[str, Any], name: str, default: float) -> float:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return float(value)
