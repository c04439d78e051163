"""The one exception hierarchy; `server/` maps it to the OpenAI error shape and HTTP statuses."""

from __future__ import annotations


class ToolwireError(Exception):
    """Base of every error toolwire raises on purpose.

    Carries what the OpenAI error shape needs (`type`, `param`, `code`) and the HTTP status a
    surface should answer with, so no surface has to guess.
    """

    status: int = 500
    error_type: str = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        if status is not None:
            self.status = status

    def to_body(self) -> dict[str, object]:
        """The OpenAI error shape: `{"error": {"message", "type", "param", "code"}}`."""
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequestError(ToolwireError):
    """The caller sent something we cannot run (HTTP 400)."""

    status = 400
    error_type = "invalid_request_error"


class NotFoundError(ToolwireError):
    """An id that does not exist, or no longer does (HTTP 404)."""

    status = 404
    error_type = "invalid_request_error"


class ConfigError(ToolwireError):
    """toolwire itself is misconfigured; raised at start-up, not per request."""

    error_type = "configuration_error"


class UpstreamError(ToolwireError):
    """The model server failed. Keeps its HTTP status and body so callers can see why."""

    status = 502
    error_type = "upstream_error"

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int | None = None,
        upstream_body: str | None = None,
        code: str | None = "upstream_error",
        status: int | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status)
        self.upstream_status = upstream_status
        self.upstream_body = upstream_body


class UpstreamHTTPError(UpstreamError):
    """The model server answered with an HTTP error status."""


class UpstreamConnectionError(UpstreamError):
    """The model server could not be reached (refused, reset, DNS)."""


class UpstreamTimeoutError(UpstreamError):
    """The model server did not answer in time (HTTP 504)."""

    status = 504


class UpstreamTooLargeError(UpstreamError):
    """The model server sent more than toolwire accepts: one stream event over
    `max_upstream_event_bytes`, or an answer over `max_upstream_response_bytes`. Not retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="upstream_response_too_large")


class UpstreamStreamError(UpstreamError):
    """A stream broke: it ended without `[DONE]` or a finish reason, or carried garbage."""


class UpstreamStreamDropped(UpstreamStreamError):
    """The connection broke or ended mid-stream: worth a retry if nothing was yielded yet."""
