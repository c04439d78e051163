"""The upstream's key never leaves toolwire: not in a relayed error, a log, a trace, a stored
response or a timeline.

Several model servers quote the key they were sent when they refuse it or fail ("Incorrect API
key provided: sk-proj-abc…wxyz", a 500 whose traceback holds the Authorization header, a
Basic header echoed in base64). Every error an upstream adapter raises passes through
`UpstreamScrubber.error` at the adapter's edge, before anything above it (the driver, the
recorder, the timeline, the sinks, the logs and traces) can see it; the forms removed are
`toolwire/scrub.py`'s.
"""

from __future__ import annotations

from toolwire.errors import UpstreamError
from toolwire.scrub import REDACTED, Scrubber

__all__ = ["REDACTED", "Scrubber", "UpstreamScrubber"]


class UpstreamScrubber(Scrubber):
    def error(self, error: UpstreamError) -> UpstreamError:
        """`error` with its message and kept body scrubbed (in place, and returned)."""
        if not self.secrets:
            return error
        error.message = self.text(error.message)
        error.args = (error.message, *error.args[1:])
        if error.upstream_body is not None:
            error.upstream_body = self.text(error.upstream_body)
        return error
