"""Tool calls written as plain text ("leaks"): detect them at the end of a turn, and optionally
salvage them into real calls. See `registry` for the formats."""

from toolwire.leaks.detector import (
    LeakMatch,
    detect_leak,
    detect_leak_in_reasoning,
    strip_reasoning,
)
from toolwire.leaks.salvage import SalvagedCall, SalvageError, salvage_calls

__all__ = [
    "LeakMatch",
    "SalvageError",
    "SalvagedCall",
    "detect_leak",
    "detect_leak_in_reasoning",
    "salvage_calls",
    "strip_reasoning",
]
