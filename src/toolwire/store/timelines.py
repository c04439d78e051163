"""Run timelines (`observe/timeline.py`): since schema 9 a column of the response's row
(`responses.timeline`), written by the response's final write; `/ui` reads them
(`store/ui_queries.py`). Their own table cost that write a statement and two B-tree pages.
"""

from __future__ import annotations

import logging

import orjson

from toolwire.wire.timeline import TimelineEntry

log = logging.getLogger("toolwire.store")


class TimelineStore:
    """A run's timeline, as the response recorder stores it with the finished response."""

    @staticmethod
    def encode(response_id: str, entries: list[TimelineEntry]) -> orjson.Fragment | None:
        """The entries' JSON, written as it is; None (no timeline stored) if they do not
        serialize: a lost timeline must lose no answer, and this is the one way it could
        fail, so it happens before the response's transaction."""
        try:
            return orjson.Fragment(orjson.dumps(entries))
        except TypeError:
            log.warning("the timeline of %s was not stored", response_id, exc_info=True)
            return None
