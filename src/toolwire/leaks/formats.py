"""Compatibility names for the registry: `toolwire.leaks.registry` holds the formats and their
openers, `toolwire.leaks.markers` the exact tokens. Nothing here is a second list."""

from toolwire.leaks.markers import *  # noqa: F403
from toolwire.leaks.markers import END_TOKENS
from toolwire.leaks.registry import (
    DRIFT_BY_ID,
    DRIFTS,
    FORMAT_BY_FAMILY,
    FORMATS,
    Drift,
    LeakFormat,
)

__all__ = [
    "DRIFTS",
    "DRIFT_BY_ID",
    "END_TOKENS",
    "FORMATS",
    "FORMAT_BY_FAMILY",
    "Drift",
    "LeakFormat",
]
