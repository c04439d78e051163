"""The server readies the cyclic collector before serving: its own heap frozen, the youngest
generation walked rarely (`server/main.py` `settle_heap` says why), and its metrics updated
in place (`observe/metrics.py`)."""

from __future__ import annotations

import gc

from toolwire.observe import metrics
from toolwire.server.main import YOUNG_COLLECTION_THRESHOLD, settle_heap


def test_the_collector_walks_young_objects_rarely_and_never_the_server_itself() -> None:
    before = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *before[1:])
        assert YOUNG_COLLECTION_THRESHOLD > 700  # Python's default
        assert gc.get_freeze_count() > 0
        assert metrics._in_place  # one process, one thread counting
    finally:
        metrics.update_in_place(False)
        gc.unfreeze()
        gc.set_threshold(*before)
