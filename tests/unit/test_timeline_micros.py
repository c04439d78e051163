"""The timeline's times are whole microseconds (`observe/timeline.py`): `_micros` gives what
`round(seconds, 6)` gave, without its decimal string."""

from __future__ import annotations

import random

from toolwire.observe.timeline import _micros


def test_micros_is_round_to_six_digits() -> None:
    rng = random.Random(38)
    samples = [0.0, 1e-7, 5e-7, 0.0000015, 0.123456789, 3600.0000004]
    samples += [rng.random() * scale for scale in (1e-3, 1.0, 100.0, 5000.0) for _ in range(5000)]
    for seconds in samples:
        assert _micros(seconds) == round(seconds, 6), seconds
