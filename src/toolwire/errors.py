"""The one exception hierarchy; `server/` maps it to the OpenAI error shape and HTTP statuses."""

from __future__ import annotations

from enum import StrEnum


class ToolwireError(Exception):
    """Base of every error toolwire raises on purpose.

    Carries what the OpenAI error shape needs (`type`, `param`, `code`) and the HTTP status a
    surface should answer with, so no surface has to guess.
    """

    status: int = 500
    error_type: str = "server_error"
    retryable: bool | None = None
    """Whether the same request may succeed if sent again; None: as the status says (408, 409,
    429 and 5xx are retried by OpenAI's SDKs). False sends `x-should-retry: false`."""
    headers: dict[str, str] | None = None
    """More headers for an HTTP answer (a 429's `x-ratelimit-*` and `retry-after`)."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        if status is not None:
            self.status = status
        if error_type is not None:
            self.error_type = error_type
        if retryable is not None:
            self.retryable = retryable

    @property
    def should_retry(self) -> bool:
        if self.retryable is not None:
            return self.retryable
        return self.status in (408, 409, 429) or self.status >= 500

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
        error_type: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(
            message, code=code, status=status, error_type=error_type, retryable=retryable
        )
        self.upstream_status = upstream_status
        self.upstream_body = upstream_body
        self.retry_after: float | None = None
        """Seconds the upstream asked to wait (a 429's or 503's `Retry-After`), when it did."""
        self.replica: str | None = None
        """The model server that failed, when a router (`upstream/fleet/`) chose it."""
        self.failover = False
        """Set by a router: another model server may answer this turn, if nothing of it
        reached the client (the loop then asks again, avoiding `replica`)."""


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
        super().__init__(message, code="upstream_response_too_large", retryable=False)


class UpstreamStreamError(UpstreamError):
    """A stream broke: it ended without `[DONE]` or a finish reason, or carried garbage."""


class UpstreamStreamDropped(UpstreamStreamError):
    """The connection broke or ended mid-stream: worth a retry if nothing was yielded yet."""


class StoreError(ToolwireError):
    """The database refused a write the run depends on (after the store's own waiting and
    retries): the run ends `failed` rather than going on unrecorded (HTTP 503)."""

    status = 503

    def __init__(self, message: str) -> None:
        super().__init__(message, code="server_error")


class ConflictingWrite(StoreError):
    """The final write lost a race the request's own checks could not see (an item id another
    request stored first): the request's own 400, told after the run, with the response stored
    `failed` saying so."""

    status = 400
    error_type = "invalid_request_error"

    def __init__(self, refused: ToolwireError) -> None:
        ToolwireError.__init__(self, refused.message, code=refused.code, param=refused.param)


# -- how a run ends: the one mapping from typed outcomes to wire codes and HTTP statuses ------


class RunStatus(StrEnum):
    """A run's final status, spelled as the Responses API spells it."""

    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StopReason(StrEnum):
    """Why a run stopped. Each reason has exactly one status, wire code and HTTP status (below)."""

    ANSWERED = "answered"
    """The model gave its final answer."""
    TOOL_CALLS = "tool_calls"
    """The model called caller-side tools: the run hands them to the caller."""
    AWAITING_APPROVAL = "awaiting_approval"
    """A call waits for a human's decision: the run pauses until the caller answers."""
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    CONTENT_FILTER = "content_filter"
    MAX_ITERATIONS = "max_iterations"
    REPEATED_FAILURE = "repeated_failure"
    LEAKED_TOOL_CALL = "leaked_tool_call"
    UPSTREAM_ERROR = "upstream_error"
    """The model server failed (the run's `error` carries its typed exception)."""
    TOOLS_UNAVAILABLE = "mcp_list_tools_failed"
    """A tool server's tools could not be listed, so the run could not start."""
    CANCELLED = "cancelled"
    """The client disconnected or cancelled the response."""
    DEADLINE = "response_deadline"
    """The run passed its overall deadline (`LoopSettings.deadline`): cut off like a token
    limit, with what it had produced so far."""
    STORE_ERROR = "store_error"
    """The run could not be recorded in the database (the error is a `StoreError`)."""

    @property
    def status(self) -> RunStatus:
        return _STATUS_OF[self]

    @property
    def incomplete_reason(self) -> str | None:
        """`incomplete_details.reason` on a Responses object (None unless incomplete): only
        OpenAI's values (`max_output_tokens`, `content_filter`), which strict clients check.
        toolwire's own reasons (an iteration cap, a deadline, a stuck leak, repeated
        failures) all mean "the run stopped before a finished answer", which is what
        `max_output_tokens` tells a client; the exact reason rides alongside as
        `incomplete_details.toolwire_reason`."""
        if _STATUS_OF[self] is not RunStatus.INCOMPLETE:
            return None
        return self.value if self in _OPENAI_INCOMPLETE else StopReason.MAX_OUTPUT_TOKENS.value


_OPENAI_INCOMPLETE = frozenset({StopReason.MAX_OUTPUT_TOKENS, StopReason.CONTENT_FILTER})

_STATUS_OF: dict[StopReason, RunStatus] = {
    StopReason.ANSWERED: RunStatus.COMPLETED,
    StopReason.TOOL_CALLS: RunStatus.COMPLETED,
    StopReason.AWAITING_APPROVAL: RunStatus.COMPLETED,
    StopReason.MAX_OUTPUT_TOKENS: RunStatus.INCOMPLETE,
    StopReason.CONTENT_FILTER: RunStatus.INCOMPLETE,
    StopReason.MAX_ITERATIONS: RunStatus.INCOMPLETE,
    StopReason.REPEATED_FAILURE: RunStatus.INCOMPLETE,
    StopReason.LEAKED_TOOL_CALL: RunStatus.INCOMPLETE,
    StopReason.UPSTREAM_ERROR: RunStatus.FAILED,
    StopReason.TOOLS_UNAVAILABLE: RunStatus.FAILED,
    StopReason.CANCELLED: RunStatus.CANCELLED,
    StopReason.DEADLINE: RunStatus.INCOMPLETE,
    StopReason.STORE_ERROR: RunStatus.FAILED,
}


class ToolsUnavailableError(ToolwireError):
    """A tool server's tools could not be listed (HTTP 424, as OpenAI answers for MCP)."""

    status = 424
    error_type = "external_connector_error"


class UnansweredRunError(ToolwireError):
    """A run ended without an answer a chat-completions client can use (leaked calls past the
    retry cap, the iteration cap, repeated failures). Not the upstream's fault as such, and
    retrying the same request would fail the same way: 422, with the reason as the code."""

    status = 422
    error_type = "invalid_request_error"


def run_error(
    reason: StopReason, message: str | None, error: ToolwireError | None
) -> ToolwireError:
    """The error a door that cannot express an unfinished run (the chat door) raises for it."""
    if error is not None:
        return error
    if reason is StopReason.TOOLS_UNAVAILABLE:
        return ToolsUnavailableError(message or reason.value, code=reason.value)
    if reason.status is RunStatus.FAILED:
        return UpstreamError(message or "the upstream failed", code=reason.value)
    return UnansweredRunError(message or reason.value, code=reason.value)


RESPONSE_ERROR_CODES = frozenset(
    {
        "server_error",
        "rate_limit_exceeded",
        "invalid_prompt",
        "data_residency_mismatch",
        "bio_policy",
        "vector_store_timeout",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "invalid_image_mode",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
    }
)
"""`error.code` of a failed Responses object is one of these (OpenAI's `ResponseErrorCode`)."""


def error_code(reason: StopReason, error: ToolwireError | None) -> str:
    """`error.code` on a failed Responses object: OpenAI's enum, by the error's code or status
    (the detailed code stays on the HTTP error and in the message)."""
    if error is not None:
        if error.code in RESPONSE_ERROR_CODES:
            return error.code
        if error.status == 429:
            return "rate_limit_exceeded"
        if 400 <= error.status < 500 and error.status not in (408, 409, 424):
            return "invalid_prompt"
    return "server_error"


MISSING_MODEL = (
    "Missing required parameter: 'model'. (Or start `toolwire serve --model NAME` to give "
    "requests that name none a default.)"
)
"""OpenAI's message for a request without `model`, and the fix on toolwire's side."""
