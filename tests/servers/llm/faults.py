"""Scripted faults of the stand-in LLM server: HTTP errors, timeouts, broken bodies, refusals, cut outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, consumed by the next request to a route.

    Build faults with the class-method constructors rather than directly.

    Attributes:
        kind: ``"status"`` (an error response), ``"timeout"`` (sleep past the
            client's read timeout, then drop the connection), ``"malformed_json"``
            (200 with an unparsable JSON body), ``"truncated_body"`` (200 whose
            ``Content-Length`` exceeds the bytes sent, then close),
            ``"disconnect"`` (close the connection without any response),
            ``"refusal"`` (a 200 in which the model declines: OpenAI
            ``message.refusal``, Anthropic ``stop_reason: "refusal"``) or
            ``"truncated_output"`` (a 200 whose text is the responder's, cut:
            OpenAI ``finish_reason: "length"``, Anthropic ``stop_reason:
            "max_tokens"``).
        status: HTTP status for ``"status"`` faults.
        message: Error message placed in the API's error body (the refusal
            text for ``"refusal"``).
        error_type: Overrides the error ``type`` in the body (default: derived
            from the status and the API).
        code: OpenAI error ``code`` (default: derived from the status).
        retry_after: Value for the ``retry-after`` header, in seconds.
        retry_after_ms: Value for the ``retry-after-ms`` header, in milliseconds.
        should_retry: When not None, sends ``x-should-retry: true|false``.
        seconds: Sleep for ``"timeout"`` faults; None means the client's
            ``x-stainless-read-timeout`` plus one second (30 s without it).
            For ``"truncated_output"``: the share of the text kept (0-1).
        headers: Extra response headers.
    """

    kind: str
    status: int = 200
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    seconds: float | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def error(
        cls,
        status: int,
        *,
        message: str | None = None,
        error_type: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        should_retry: bool | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """An error response with the given status in the API's error format.

        Args:
            status: HTTP status code (4xx or 5xx).
            message: Error message; a status-specific default otherwise.
            error_type: Error ``type`` in the body; derived from status otherwise.
            code: OpenAI error ``code``; derived from status otherwise.
            retry_after: ``retry-after`` header value in seconds.
            retry_after_ms: ``retry-after-ms`` header value in milliseconds.
            should_retry: Sends ``x-should-retry: true|false`` when not None.
            headers: Extra response headers.

        Returns:
            The fault.
        """
        return cls(
            kind="status",
            status=status,
            message=message,
            error_type=error_type,
            code=code,
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
            should_retry=should_retry,
            headers=tuple((headers or {}).items()),
        )

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.2, *, retry_after_ms: float | None = None) -> Fault:
        """A 429 with a ``retry-after`` header (seconds) and a rate-limit body.

        Args:
            retry_after: ``retry-after`` value in seconds (None: header omitted).
            retry_after_ms: Optional ``retry-after-ms`` value; the SDKs prefer it.

        Returns:
            The fault.
        """
        return cls.error(429, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def server_error(cls, status: int = 500, *, retry_after: float | None = None) -> Fault:
        """A 5xx internal error (the SDKs back off ~0.5 s unless told otherwise).

        Args:
            status: HTTP status, 500 by default.
            retry_after: Optional ``retry-after`` seconds to shorten the backoff.

        Returns:
            The fault.
        """
        return cls.error(status, retry_after=retry_after)

    @classmethod
    def overloaded(cls, *, retry_after: float | None = None, retry_after_ms: float | None = None) -> Fault:
        """Anthropic's 529 ``overloaded_error`` (raised as ``anthropic.OverloadedError``).

        Args:
            retry_after: Optional ``retry-after`` seconds.
            retry_after_ms: Optional ``retry-after-ms`` milliseconds.

        Returns:
            The fault.
        """
        return cls.error(529, retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def timeout(cls, seconds: float | None = None) -> Fault:
        """Hold the request longer than the client waits, then drop the connection.

        Args:
            seconds: How long to hold; None uses the client's
                ``x-stainless-read-timeout`` header plus one second.  The sleep
                ends early when the server stops.

        Returns:
            The fault.
        """
        return cls(kind="timeout", seconds=seconds)

    @classmethod
    def malformed_json(cls) -> Fault:
        """A 200 ``application/json`` response whose body is not valid JSON."""
        return cls(kind="malformed_json")

    @classmethod
    def truncated_body(cls) -> Fault:
        """A 200 whose ``Content-Length`` promises more bytes than are sent."""
        return cls(kind="truncated_body")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection after reading the request, sending nothing."""
        return cls(kind="disconnect")

    @classmethod
    def refusal(cls, message: str = "I'm sorry, but I can't help with that request.") -> Fault:
        """A 200 in which the model refuses.

        OpenAI: ``message.content`` null, ``message.refusal`` set, ``finish_reason:
        "stop"``. Anthropic: ``stop_reason: "refusal"``, the refusal text as the only
        text block and ``stop_details: {"type": "refusal"}``.

        Args:
            message: The refusal text.

        Returns:
            The fault.
        """
        return cls(kind="refusal", message=message)

    @classmethod
    def truncated_output(cls, keep: float = 0.5) -> Fault:
        """A 200 whose output hit the token limit: the responder's text, cut.

        OpenAI: ``finish_reason: "length"`` (a forced tool's arguments are cut too).
        Anthropic: ``stop_reason: "max_tokens"`` (a forced tool's input is ``{}``).

        Args:
            keep: Share of the text kept, between 0 and 1.

        Returns:
            The fault.
        """
        return cls(kind="truncated_output", seconds=max(0.0, min(1.0, keep)))


_CONTENT_FAULTS = frozenset({"refusal", "truncated_output"})
"""Faults that change a normal reply instead of replacing it."""
