"""Per-minute limits count in calendar minutes (`store/quotas.py`): a test that spends a key's
requests of one minute and then checks the refusal or the usage must not straddle a minute's
end, or the window starts afresh halfway (a flake every few dozen runs)."""

from __future__ import annotations

import asyncio
import time


def seconds_to_wait(needed: float) -> float:
    """How long to wait so that `needed` seconds fit before the current minute ends."""
    left = 60 - time.time() % 60
    return 0.0 if left > needed else left + 0.05


def start_in_a_fresh_minute_if_needed(needed: float) -> None:
    time.sleep(seconds_to_wait(needed))


async def start_in_a_fresh_minute_if_needed_async(needed: float) -> None:
    await asyncio.sleep(seconds_to_wait(needed))
