"""Stand-in OpenAI and Anthropic HTTP server for tests.

Why this exists
---------------
aptforge talks to LLM providers through the *real* official SDKs (``openai`` 3.x
and ``anthropic`` 2.x).  Those SDKs use the ``httpx2`` transport, so mocking-library
transport mocks do not apply, and the project never monkeypatches SDKs.  Tests
therefore point the real clients at this server on ``127.0.0.1``, which speaks
the providers' wire protocols closely enough that the SDKs' own request
building, response parsing, error mapping, retry and timeout logic run exactly
as they would against the real services.

The server is built only on the standard library
(:class:`http.server.ThreadingHTTPServer` in a background thread) and offers:

* OpenAI: ``POST /v1/chat/completions`` (incl. ``response_format`` json_schema
  and forced function tools), ``GET /v1/models``, ``POST /v1/files`` (multipart), ``GET
  /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
  ``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``.
* Anthropic: ``POST /v1/messages`` (incl. forced tools and
  ``output_config.format``), ``POST /v1/messages/batches``, ``GET
  /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` and
  ``POST /v1/messages/batches/{id}/cancel``.
* A pluggable *responder* producing the assistant text, scripted *faults*
  consumed in order per route (HTTP errors, timeouts, broken bodies, and model
  refusals or outputs cut at the token limit), optional per-request *latency*,
  authentication in each API's error format, and a thread-safe request log.
* ``python -m tests.servers.llm --latency 0.1`` serves it standalone (prints the
  base URL), for manual builds and benchmarks in another process.

Facts about the SDKs this server relies on (read from their sources):

* Both SDKs retry 408, 409, 429 and every status >= 500 (so 529 too), plus
  connection errors and timeouts, unless the response carries
  ``x-should-retry: true|false``, which wins.
* Both honour ``retry-after-ms`` first, then ``retry-after`` (seconds, floats
  allowed, or an HTTP date); a value <= 0 falls back to exponential backoff
  (0.5 s doubling, at most 8 s, minus up to 25 % jitter).  ``openai`` refuses to
  retry at all when the server asks for more than 120 s; ``anthropic`` has no
  such cap and will sleep as long as told.
* ``anthropic`` 2.x sends its API key as ``Authorization: Bearer <key>``, not
  ``x-api-key``; the Anthropic routes therefore accept either header.
* Both SDKs send ``x-stainless-retry-count`` and ``x-stainless-read-timeout``
  headers; the timeout fault uses the latter to outlast the client.

Example:
    >>> with LLMStandInServer() as server:                      # doctest: +SKIP
    ...     server.add_faults("chat.completions.create", Fault.rate_limit(0.2))
    ...     client = openai.OpenAI(base_url=server.openai_base_url,
    ...                            api_key=server.openai_api_key)
    ...     client.chat.completions.create(model="m", messages=[...])
    ...     assert server.count("chat.completions.create") == 2
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import email.message
import hashlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ANTHROPIC",
    "OPENAI",
    "RESPONDERS",
    "ROUTES",
    "Fault",
    "LLMStandInServer",
    "RecordedRequest",
    "Responder",
    "default_responder",
    "distractor_responder",
    "forced_tool",
    "last_user_text",
    "requested_schema",
    "schema_instance",
]

OPENAI = "openai"
"""API name passed to responders for OpenAI requests."""

ANTHROPIC = "anthropic"
"""API name passed to responders for Anthropic requests."""

Responder = Callable[[str, dict[str, Any]], str]
"""``responder(api, request_json) -> text`` producing the assistant's text.

``api`` is :data:`OPENAI` or :data:`ANTHROPIC`; ``request_json`` is the parsed
request body (a chat completion / message creation body, also for batch lines).
When the request forces a tool, the text must be a JSON object: it becomes the
tool call's arguments (OpenAI) or the ``tool_use`` block's ``input``
(Anthropic).  An exception raised by the responder becomes a 500 in the API's
error format (or an errored batch line).
"""

ANTHROPIC_VERSION_HEADER = "anthropic-version"
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})
_MAX_TIMEOUT_FAULT_SECONDS = 60.0

# (method, path regex, route name, api)
_ROUTE_TABLE: tuple[tuple[str, re.Pattern[str], str, str], ...] = tuple(
    (method, re.compile(pattern), name, api)
    for method, pattern, name, api in (
        ("POST", r"^/v1/chat/completions$", "chat.completions.create", OPENAI),
        ("GET", r"^/v1/models$", "models.list", OPENAI),
        ("POST", r"^/v1/files$", "files.create", OPENAI),
        ("GET", r"^/v1/files/(?P<id>[^/]+)$", "files.retrieve", OPENAI),
        ("GET", r"^/v1/files/(?P<id>[^/]+)/content$", "files.content", OPENAI),
        ("POST", r"^/v1/batches$", "batches.create", OPENAI),
        ("GET", r"^/v1/batches/(?P<id>[^/]+)$", "batches.retrieve", OPENAI),
        ("POST", r"^/v1/batches/(?P<id>[^/]+)/cancel$", "batches.cancel", OPENAI),
        ("POST", r"^/v1/messages$", "messages.create", ANTHROPIC),
        ("POST", r"^/v1/messages/batches$", "messages.batches.create", ANTHROPIC),
        ("GET", r"^/v1/messages/batches/(?P<id>[^/]+)$", "messages.batches.retrieve", ANTHROPIC),
        ("GET", r"^/v1/messages/batches/(?P<id>[^/]+)/results$", "messages.batches.results", ANTHROPIC),
        ("POST", r"^/v1/messages/batches/(?P<id>[^/]+)/cancel$", "messages.batches.cancel", ANTHROPIC),
    )
)

ROUTES: tuple[str, ...] = tuple(name for _, _, name, _ in _ROUTE_TABLE)
"""Route names accepted by :meth:`LLMStandInServer.add_faults` and friends.

They mirror the SDK method that calls them, e.g. ``"chat.completions.create"``
for ``openai_client.chat.completions.create`` and ``"messages.batches.results"``
for ``anthropic_client.messages.batches.results``.
"""

_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", None),
    408: ("timeout", None),
    409: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Invalid API key provided.",
    404: "Not found.",
    408: "Request timed out.",
    429: "Rate limit reached for requests. Please try again later.",
    500: "The server had an error while processing your request. Sorry about that!",
    502: "Bad gateway.",
    503: "The server is overloaded or not ready yet.",
    529: "Overloaded",
}


# --------------------------------------------------------------------------- #
# Faults
# --------------------------------------------------------------------------- #


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


# --------------------------------------------------------------------------- #
# Request log
# --------------------------------------------------------------------------- #


@dataclasses.dataclass
class RecordedRequest:
    """One request as the server saw it.

    Attributes:
        api: :data:`OPENAI` or :data:`ANTHROPIC`.
        route: Route name (see :data:`ROUTES`), or None for an unknown path.
        method: HTTP method.
        path: URL path without the query string.
        query: Parsed query string.
        headers: Request headers with lower-cased names, credentials removed.
        json: Parsed JSON body, or None (no body, multipart or invalid JSON).
        form: Multipart fields (file fields as bytes), or None.
        body_size: Size of the raw request body in bytes.
        received_at: ``time.monotonic()`` when the request was fully read.
        authenticated: Whether the credentials were accepted.
        fault: Kind of the scripted fault applied, if any.
        status: Status code sent (filled in when the response goes out), or
            None when no response was sent (timeout/disconnect faults).
    """

    api: str
    route: str | None
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Any
    form: dict[str, Any] | None
    body_size: int
    received_at: float
    authenticated: bool = False
    fault: str | None = None
    status: int | None = None


# --------------------------------------------------------------------------- #
# Responder helpers
# --------------------------------------------------------------------------- #


def _content_text(content: Any) -> str:
    """Concatenates the text of a message ``content`` (string or parts list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return ""


def last_user_text(api: str, request_json: Mapping[str, Any]) -> str:
    """Returns the text of the last ``user`` message of a request.

    Args:
        api: :data:`OPENAI` or :data:`ANTHROPIC` (both use ``messages``).
        request_json: Chat completion or message creation body.

    Returns:
        The concatenated text parts of the last user message, or ``""``.
    """
    del api  # both APIs share the {"role", "content"} message shape
    for message in reversed(list(request_json.get("messages") or [])):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def forced_tool(api: str, request_json: Mapping[str, Any]) -> dict[str, Any] | None:
    """Returns the tool definition the request forces the model to call, if any.

    OpenAI forces a tool with ``tool_choice={"type": "function", "function":
    {"name": ...}}`` or ``"required"`` (first tool); Anthropic with
    ``tool_choice={"type": "tool", "name": ...}`` or ``{"type": "any"}``.

    Args:
        api: :data:`OPENAI` or :data:`ANTHROPIC`.
        request_json: The request body.

    Returns:
        A dict with ``name`` and ``schema`` (the tool's JSON schema), or None.
    """
    tools = [t for t in (request_json.get("tools") or []) if isinstance(t, Mapping)]
    choice = request_json.get("tool_choice")
    if not tools or choice is None:
        return None
    if api == OPENAI:
        functions = [t.get("function") or {} for t in tools if t.get("type", "function") == "function"]
        if choice == "required" and functions:
            wanted = functions[0].get("name")
        elif isinstance(choice, Mapping) and choice.get("type") == "function":
            wanted = (choice.get("function") or {}).get("name")
        else:
            return None
        for function in functions:
            if function.get("name") == wanted:
                return {"name": wanted, "schema": function.get("parameters") or {"type": "object"}}
        return None
    if not isinstance(choice, Mapping):
        return None
    if choice.get("type") == "any":
        wanted = tools[0].get("name")
    elif choice.get("type") == "tool":
        wanted = choice.get("name")
    else:
        return None
    for tool in tools:
        if tool.get("name") == wanted:
            return {"name": wanted, "schema": tool.get("input_schema") or {"type": "object"}}
    return None


def requested_schema(api: str, request_json: Mapping[str, Any]) -> dict[str, Any] | None:
    """Returns the JSON schema the reply text must satisfy, if the request sets one.

    Looks at a forced tool (see :func:`forced_tool`), OpenAI's
    ``response_format={"type": "json_schema", "json_schema": {"schema": ...}}``
    and Anthropic's ``output_config={"format": {"type": "json_schema",
    "schema": ...}}``.

    Args:
        api: :data:`OPENAI` or :data:`ANTHROPIC`.
        request_json: The request body.

    Returns:
        The schema, or None when the reply is free text.
    """
    tool = forced_tool(api, request_json)
    if tool is not None:
        return tool["schema"]
    if api == OPENAI:
        fmt = request_json.get("response_format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        return None
    fmt = (request_json.get("output_config") or {}).get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        return fmt.get("schema") or {"type": "object"}
    return None


def _sub_seed(seed: str, key: object) -> str:
    """Derives the seed of a nested schema node from its parent's seed."""
    return hashlib.sha256(f"{seed}/{key}".encode()).hexdigest()


def schema_instance(schema: Mapping[str, Any], seed: str = "0" * 64) -> Any:
    """Builds a deterministic JSON value that satisfies a (simple) JSON schema.

    Supports ``type`` (including lists), ``properties``, ``items``, ``enum``,
    ``const``, ``anyOf``/``oneOf``/``allOf`` (first branch), local ``$ref``
    (``#/$defs/...``), ``minItems``/``maxItems``, ``minimum``/``maximum``,
    ``minLength``/``maxLength`` and a few string ``format`` values.  Every
    declared property is emitted, as OpenAI strict mode requires.

    Args:
        schema: The JSON schema.
        seed: Hex string that makes the values vary deterministically.

    Returns:
        A JSON-serialisable value.
    """
    return _instance(schema, seed, schema, 0)


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Resolves a local JSON pointer such as ``#/$defs/Item`` against the root schema."""
    node: Any = root
    if not ref.startswith("#"):
        return {}
    for token in ref.lstrip("#").strip("/").split("/"):
        if not token:
            continue
        token = token.replace("~1", "/").replace("~0", "~")
        node = node.get(token, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, Mapping) else {}


def _instance(schema: Any, seed: str, root: Mapping[str, Any], depth: int) -> Any:
    """Recursive worker of :func:`schema_instance`."""
    if not isinstance(schema, Mapping):
        return None
    if "$ref" in schema:
        return _instance(_resolve_ref(schema["$ref"], root), seed, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = list(schema["enum"])
        return options[int(seed[:8], 16) % len(options)]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, Mapping)]
        if branches:
            non_null = [b for b in branches if b.get("type") != "null"] or branches
            return _instance(non_null[0], seed, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    number = int(seed[:8], 16)
    if kind == "object":
        properties = schema.get("properties") or {}
        names = list(properties)
        if depth > 6:  # keep recursive schemas finite
            names = [n for n in names if n in set(schema.get("required") or [])]
        return {name: _instance(properties[name], _sub_seed(seed, name), root, depth + 1) for name in names}
    if kind == "array":
        count = int(schema.get("minItems", 0 if depth > 6 else 1))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [
            _instance(schema.get("items") or {}, _sub_seed(seed, i), root, depth + 1) for i in range(count)
        ]
    if kind == "integer":
        low = schema.get(
            "minimum", schema.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in schema else 0
        )
        high = schema.get(
            "maximum", schema.get("exclusiveMaximum", 0) - 1 if "exclusiveMaximum" in schema else None
        )
        low = int(low)
        high = int(high) if high is not None else low + 99
        return low + number % max(1, high - low + 1)
    if kind == "number":
        low = float(schema.get("minimum", schema.get("exclusiveMinimum", 0.0)))
        high = float(schema.get("maximum", schema.get("exclusiveMaximum", low + 100.0)))
        value = low + (number % 10_000) / 10_000 * (high - low)
        return value if value > low or "exclusiveMinimum" not in schema else (low + high) / 2
    if kind == "boolean":
        return number % 2 == 0
    if kind == "null":
        return None
    fmt = schema.get("format")
    fixed = {
        "date-time": "2024-01-01T00:00:00Z",
        "date": "2024-01-01",
        "time": "00:00:00",
        "email": f"user-{seed[:6]}@example.com",
        "uri": f"https://example.com/{seed[:8]}",
        "uuid": str(uuid.UUID(seed[:32])),
    }
    if fmt in fixed:
        return fixed[fmt]
    text = f"value-{seed[:8]}"
    min_length, max_length = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(text) < min_length:
        text = (text * (min_length // len(text) + 1))[:min_length]
    if max_length is not None:
        text = text[: int(max_length)]
    return text


def default_responder(api: str, request_json: dict[str, Any]) -> str:
    """The default :data:`Responder`: deterministic JSON derived from the prompt.

    The seed is the SHA-256 of the last user message (see :func:`last_user_text`),
    so equal prompts get equal answers across both APIs.  When the request
    demands a schema (forced tool, json_schema response format or output
    config), the reply is :func:`schema_instance` of that schema; otherwise it
    is ``{"echo": <last user text>, "sha256": <hex digest>}``.

    Args:
        api: :data:`OPENAI` or :data:`ANTHROPIC`.
        request_json: The request body.

    Returns:
        A JSON document as text.
    """
    text = last_user_text(api, request_json)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    schema = requested_schema(api, request_json)
    if schema is not None:
        return json.dumps(schema_instance(schema, digest), sort_keys=True)
    return json.dumps({"echo": text, "sha256": digest}, sort_keys=True)


_VERBS = (
    "inspect",
    "rewrite",
    "add a regression test for",
    "trace the callers of",
    "read the docstring of",
    "profile",
    "refactor",
    "print debug output from",
    "revert the latest change to",
    "search the test suite for",
)
_OBJECTS = (
    "the config loader",
    "the command-line entry point",
    "the tokenizer of the parser",
    "the cache layer",
    "the packaging metadata",
    "the logging setup",
    "the examples in the README",
    "the CI workflow file",
    "the public API exports",
    "the formatting of error messages",
)
_KINDS = ("premature", "redundant", "wrong_target", "wrong_order")


def distractor_responder(api: str, request_json: dict[str, Any]) -> str:
    """A :data:`Responder` that answers aptforge's distractor prompts with valid distractors.

    It reads the count from the prompt's "exactly N" (3 when absent) and the correct
    answer from between ``<correct>`` tags; it writes N distinct plans ("I need to
    <verb> <object>", each verb and object used once), or N JSON steps with
    ``planning`` and ``execution`` keys when the correct answer is a JSON object.
    Deterministic: the choice of words is seeded by the SHA-256 of the prompt.

    Args:
        api: :data:`OPENAI` or :data:`ANTHROPIC`.
        request_json: The request body.

    Returns:
        ``{"distractors": [{"kind": ..., "text": ...}, ...]}`` as JSON text.
    """
    text = last_user_text(api, request_json)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    count_match = re.search(r"exactly (\d+)", text)
    count = int(count_match.group(1)) if count_match else 3
    correct = re.search(r"<correct>\s*(.*?)\s*</correct>", text, re.S)
    as_json = False
    if correct:
        try:
            as_json = isinstance(json.loads(correct.group(1)), dict)
        except ValueError:
            as_json = False
    first, second = int(digest[:8], 16), int(digest[8:16], 16)
    items = []
    for i in range(count):
        verb = _VERBS[(first + 3 * i) % len(_VERBS)]
        obj = _OBJECTS[(second + 7 * i) % len(_OBJECTS)]
        plan = f"I need to {verb} {obj}"
        if as_json:
            step = {
                "planning": f"Next, {verb} {obj}.",
                "execution": {"name": "web_search", "args": {"text": obj}},
            }
            plan = json.dumps(step, ensure_ascii=False)
        items.append({"kind": _KINDS[i % len(_KINDS)], "text": plan})
    return json.dumps({"distractors": items})


RESPONDERS: dict[str, Responder] = {"default": default_responder, "distractors": distractor_responder}
"""Responders by name, for the standalone server (``--responder``)."""


# --------------------------------------------------------------------------- #
# Internals
# --------------------------------------------------------------------------- #


class _APIError(Exception):
    """An error response to send in the current API's format."""

    def __init__(
        self,
        status: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message or _DEFAULT_MESSAGES.get(status, f"HTTP {status}"))
        self.status = status
        self.message = str(self)
        self.error_type = error_type
        self.code = code
        self.param = param


def _error_body(
    api: str,
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Builds an error body in the given API's shape."""
    if api == ANTHROPIC:
        kind = (
            error_type
            or _ANTHROPIC_ERROR_TYPES.get(status)
            or ("api_error" if status >= 500 else "invalid_request_error")
        )
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    default_type, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": param,
            "code": code if code is not None else default_code,
        }
    }


def _approx_tokens(text: str) -> int:
    """Rough, deterministic token estimate (4 characters per token, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def _prompt_text(request_json: Mapping[str, Any]) -> str:
    parts = [_content_text(request_json.get("system"))]
    for message in request_json.get("messages") or []:
        if isinstance(message, Mapping):
            parts.append(_content_text(message.get("content")))
    return "\n".join(p for p in parts if p)


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _parse_multipart(content_type: str, body: bytes) -> dict[str, Any]:
    """Parses a ``multipart/form-data`` body; file fields come back as bytes.

    Args:
        content_type: The request's Content-Type header (with boundary).
        body: The raw body.

    Returns:
        Field name -> str (plain fields) or bytes (file fields); file names are
        stored under ``"<field>.filename"``.

    Raises:
        _APIError: When the body is not valid multipart.
    """
    header = email.message.Message()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise _APIError(400, "Invalid multipart body: missing boundary.")
    delimiter = b"--" + boundary.encode("latin-1")
    fields: dict[str, Any] = {}
    chunks = body.split(delimiter)
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise _APIError(400, "Invalid multipart body: part without headers.")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        part = email.message.Message()
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name:
                part[name.strip()] = value.strip()
        field = part.get_param("name", header="content-disposition")
        if not isinstance(field, str):
            continue
        filename = part.get_param("filename", header="content-disposition")
        if isinstance(filename, str):
            fields[field] = content
            fields[f"{field}.filename"] = filename
        else:
            fields[field] = content.decode("utf-8")
    return fields


@dataclasses.dataclass
class _StoredFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclasses.dataclass
class _OpenAIBatch:
    data: dict[str, Any]
    lines: list[dict[str, Any]]
    line_errors: list[dict[str, Any]]
    in_progress_polls: int = 0


@dataclasses.dataclass
class _AnthropicBatch:
    data: dict[str, Any]
    requests: list[dict[str, Any]]
    results: bytes | None = None
    in_progress_polls: int = 0
    finishing: bool = False


class _Handler(BaseHTTPRequestHandler):
    """Per-connection request handler; all state lives on ``server.owner``."""

    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes; without TCP_NODELAY, Nagle plus the
    # client's delayed ACK adds ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True
    server_version = "aptforge-llm-standin/1.0"
    sys_version = ""
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silences the default stderr access log."""

    def do_GET(self) -> None:
        """Handles GET requests."""
        self._dispatch()

    def do_POST(self) -> None:
        """Handles POST requests."""
        self._dispatch()

    def do_DELETE(self) -> None:
        """Handles DELETE requests (always 404 here)."""
        self._dispatch()

    def read_body(self) -> bytes:
        """Reads the request body (Content-Length or chunked transfer encoding)."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def setup(self) -> None:
        """Registers the connection so :meth:`LLMStandInServer.stop` can close it."""
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        """Unregisters the connection once the client or the server closed it."""
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def _dispatch(self) -> None:
        try:
            self.server.owner._handle(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def send_bytes(self, status: int, body: bytes, content_type: str, headers: Mapping[str, str]) -> None:
        """Writes a complete response.

        Args:
            status: HTTP status code.
            body: Response body.
            content_type: Content-Type header value.
            headers: Extra headers.
        """
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True
    owner: LLMStandInServer


# --------------------------------------------------------------------------- #
# The server
# --------------------------------------------------------------------------- #


class LLMStandInServer:
    """Stand-in OpenAI + Anthropic server on ``127.0.0.1`` for the real SDKs.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`)::

        with LLMStandInServer() as server:
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="test-key")
            anthropic_client = anthropic.Anthropic(
                base_url=server.anthropic_base_url, api_key="test-key")

    Attributes:
        responder: The :data:`Responder` producing assistant text; may be
            replaced at any time.
        openai_api_key: Bearer key OpenAI routes accept (None: any non-empty key).
        anthropic_api_key: Key Anthropic routes accept in ``x-api-key`` or
            ``Authorization: Bearer`` (None: any non-empty key).
        batch_in_progress_polls: How many retrieve polls report ``in_progress``
            before a batch finishes.  OpenAI: create says ``validating``, the
            next poll ``in_progress`` (this many times), then ``completed``.
            Anthropic: create says ``in_progress``, polls repeat it this many
            times, then ``ended``.
        model_name: Model reported when a request names none.
        errors: Messages of exceptions raised while handling requests,
            including responder exceptions (which are answered with a 500).
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        openai_api_key: str | None = "test-key",
        anthropic_api_key: str | None = "test-key",
        latency: float = 0.0,
        batch_in_progress_polls: int = 1,
        host: str = "127.0.0.1",
    ) -> None:
        """Creates the server (not yet listening; see :meth:`start`).

        Args:
            responder: Produces the assistant text; :func:`default_responder`
                when None.
            openai_api_key: Accepted OpenAI key (None: any non-empty key).
            anthropic_api_key: Accepted Anthropic key (None: any non-empty key).
            latency: Seconds added to every request (see :meth:`set_latency`).
            batch_in_progress_polls: Polls reporting ``in_progress`` per batch.
            host: Loopback address to bind; the port is always chosen by the OS.
        """
        self.responder: Responder = responder or default_responder
        self.openai_api_key = openai_api_key
        self.anthropic_api_key = anthropic_api_key
        self.batch_in_progress_polls = batch_in_progress_polls
        self.model_name = "standin-model"
        self.errors: list[str] = []
        self._host = host
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set = set()
        self._latency_default = float(latency)
        self._latency_by_route: dict[str, float] = {}
        self._faults: dict[str, collections.deque[Fault]] = collections.defaultdict(collections.deque)
        self._log: list[RecordedRequest] = []
        self._counts: collections.Counter = collections.Counter()
        self._files: dict[str, _StoredFile] = {}
        self._openai_batches: dict[str, _OpenAIBatch] = {}
        self._anthropic_batches: dict[str, _AnthropicBatch] = {}

    # -- lifecycle ---------------------------------------------------------- #

    def start(self) -> LLMStandInServer:
        """Binds port 0 on the host and serves in a daemon thread.

        Returns:
            self, for chaining.
        """
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self._host, 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="llm-standin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving, wakes sleeping faults and closes every open connection.

        Clients that still pool a connection to the server get connection
        errors afterwards, as they would from a vanished host.
        """
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LLMStandInServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------- #

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("server is not running; call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)`` (ends in ``/v1``)."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for ``anthropic.Anthropic(base_url=...)`` (SDK adds ``/v1``)."""
        return self.base_url

    # -- scripting ---------------------------------------------------------- #

    @staticmethod
    def _check_route(route: str) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; expected one of {', '.join(ROUTES)}")

    def add_faults(self, route: str, *faults: Fault) -> None:
        """Queues faults for a route; each request to it consumes the next one.

        Faults apply after authentication succeeds; once the queue is empty the
        route answers normally again.

        Args:
            route: A name from :data:`ROUTES`, e.g. ``"chat.completions.create"``.
            *faults: Faults, applied in order.

        Raises:
            ValueError: For an unknown route name.
        """
        self._check_route(route)
        with self._lock:
            self._faults[route].extend(faults)

    def pending_faults(self, route: str | None = None) -> int:
        """Number of queued faults for a route (all routes when None)."""
        with self._lock:
            if route is None:
                return sum(len(q) for q in self._faults.values())
            return len(self._faults.get(route, ()))

    def clear_faults(self) -> None:
        """Drops every queued fault."""
        with self._lock:
            self._faults.clear()

    @property
    def latency(self) -> float:
        """Seconds added to every request without a per-route latency."""
        return self._latency_default

    @latency.setter
    def latency(self, seconds: float) -> None:
        self.set_latency(seconds)

    def set_latency(self, seconds: float, *routes: str) -> None:
        """Adds a fixed delay before answering (e.g. 0.1 for throughput benchmarks).

        Requests are served concurrently, so N parallel clients see roughly
        N / ``seconds`` requests per second.

        Args:
            seconds: Delay in seconds (0 disables).
            *routes: Limit the delay to these routes; all routes when empty.

        Raises:
            ValueError: For an unknown route name.
        """
        for route in routes:
            self._check_route(route)
        with self._lock:
            if routes:
                self._latency_by_route.update({route: float(seconds) for route in routes})
            else:
                self._latency_default = float(seconds)

    # -- inspection --------------------------------------------------------- #

    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of all recorded requests, oldest first."""
        with self._lock:
            return list(self._log)

    def requests_for(self, route: str) -> list[RecordedRequest]:
        """Snapshot of the recorded requests to one route, oldest first."""
        with self._lock:
            return [r for r in self._log if r.route == route]

    def count(self, route: str | None = None) -> int:
        """Number of requests received for a route (all requests when None)."""
        with self._lock:
            return sum(self._counts.values()) if route is None else self._counts.get(route, 0)

    @property
    def counts(self) -> dict[str, int]:
        """Requests received per route name (unknown paths under ``"unknown"``)."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Clears the log, counters, faults, latency, stored files and batches."""
        with self._lock:
            self._log.clear()
            self._counts.clear()
            self._faults.clear()
            self._latency_default = 0.0
            self._latency_by_route.clear()
            self._files.clear()
            self._openai_batches.clear()
            self._anthropic_batches.clear()
            self.errors.clear()

    # -- request handling --------------------------------------------------- #

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _handle(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        path, method = split.path, handler.command
        body = handler.read_body()
        received_at = time.monotonic()
        headers = {k.lower(): v for k, v in handler.headers.items()}

        route, api, params = None, (ANTHROPIC if path.startswith("/v1/messages") else OPENAI), {}
        for route_method, pattern, name, route_api in _ROUTE_TABLE:
            match = pattern.match(path)
            if match and route_method == method:
                route, api, params = name, route_api, match.groupdict()
                break

        parsed_json: Any = None
        form: dict[str, Any] | None = None
        body_error: _APIError | None = None
        content_type = headers.get("content-type", "")
        if body and content_type.startswith("multipart/form-data"):
            try:
                form = _parse_multipart(content_type, body)
            except _APIError as exc:
                body_error = exc
        elif body:
            try:
                parsed_json = json.loads(body)
            except ValueError:
                body_error = _APIError(400, "We could not parse the JSON body of your request.")

        record = RecordedRequest(
            api=api,
            route=route,
            method=method,
            path=path,
            query=parse_qs(split.query),
            headers={k: v for k, v in headers.items() if k not in _CREDENTIAL_HEADERS},
            json=parsed_json,
            form=form,
            body_size=len(body),
            received_at=received_at,
        )
        with self._lock:
            self._log.append(record)
            self._counts[route or "unknown"] += 1
            latency = self._latency_by_route.get(route or "", self._latency_default)

        request_id = _new_id("req_")
        id_header = "request-id" if api == ANTHROPIC else "x-request-id"

        def record_status(status: int) -> None:
            record.status = status

        def send_json(status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
            send_raw(status, json.dumps(payload).encode("utf-8"), "application/json", extra)

        def send_raw(status: int, data: bytes, ctype: str, extra: Mapping[str, str] | None = None) -> None:
            record.status = status
            handler.send_bytes(status, data, ctype, {id_header: request_id, **(extra or {})})

        def send_error(exc: _APIError, extra: Mapping[str, str] | None = None) -> None:
            payload = _error_body(
                api,
                exc.status,
                exc.message,
                error_type=exc.error_type,
                code=exc.code,
                param=exc.param,
                request_id=request_id,
            )
            send_json(exc.status, payload, extra)

        if not self._authenticate(api, headers):
            record.authenticated = False
            if api == ANTHROPIC:
                message = "invalid x-api-key"
            else:
                message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
            send_error(_APIError(401, message))
            return
        record.authenticated = True

        if latency > 0:
            self._stopping.wait(latency)

        fault: Fault | None = None
        if route is not None:
            with self._lock:
                queue = self._faults.get(route)
                if queue:
                    fault = queue.popleft()
        if fault is not None:
            record.fault = fault.kind
        if fault is not None and fault.kind not in _CONTENT_FAULTS:
            self._apply_fault(handler, fault, headers, api, send_error, send_raw, record_status)
            return

        try:
            if route is None:
                raise _APIError(404, f"Invalid URL ({method} {path})" if api == OPENAI else "Not Found")
            if body_error is not None:
                raise body_error
            if api == ANTHROPIC and not headers.get(ANTHROPIC_VERSION_HEADER):
                raise _APIError(400, "anthropic-version: header is required")
            status, payload = self._route(route, params, parsed_json, form, fault)
        except _APIError as exc:
            send_error(exc)
            return
        except Exception as exc:
            with self._lock:
                self.errors.append(f"{route}: {type(exc).__name__}: {exc}")
            send_error(_APIError(500, f"stand-in server error: {type(exc).__name__}: {exc}"))
            return
        if isinstance(payload, tuple):
            data, ctype = payload
            send_raw(status, data, ctype)
        else:
            send_json(status, payload)

    def _authenticate(self, api: str, headers: Mapping[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        token = bearer[7:].strip() if bearer.lower().startswith("bearer ") else ""
        if api == ANTHROPIC:
            candidates = [c for c in (headers.get("x-api-key", "").strip(), token) if c]
            expected = self.anthropic_api_key
        else:
            candidates = [token] if token else []
            expected = self.openai_api_key
        if expected is None:
            return bool(candidates)
        return expected in candidates

    def _apply_fault(
        self,
        handler: _Handler,
        fault: Fault,
        headers: Mapping[str, str],
        api: str,
        send_error: Callable[..., None],
        send_raw: Callable[..., None],
        record_status: Callable[[int], None],
    ) -> None:
        """Answers (or deliberately fails to answer) a request as ``fault`` says."""
        if fault.kind == "status":
            extra = dict(fault.headers)
            if fault.retry_after is not None:
                extra["retry-after"] = f"{fault.retry_after:g}"
            if fault.retry_after_ms is not None:
                extra["retry-after-ms"] = f"{fault.retry_after_ms:g}"
            if fault.should_retry is not None:
                extra["x-should-retry"] = "true" if fault.should_retry else "false"
            send_error(
                _APIError(fault.status, fault.message, error_type=fault.error_type, code=fault.code), extra
            )
        elif fault.kind == "timeout":
            seconds = fault.seconds
            if seconds is None:
                try:
                    seconds = float(headers.get("x-stainless-read-timeout", "")) + 1.0
                except ValueError:
                    seconds = 30.0
            self._stopping.wait(min(seconds, _MAX_TIMEOUT_FAULT_SECONDS))
            handler.close_connection = True
        elif fault.kind == "malformed_json":
            prefix = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"index": 0,'
            send_raw(200, prefix + b" <<not json>>", "application/json")
        elif fault.kind == "truncated_body":
            payload = json.dumps(
                {"id": "truncated", "type": "message" if api == ANTHROPIC else "chat.completion"}
            )
            data = payload.encode()
            handler.close_connection = True
            record_status(200)
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data) + 512))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(data[: len(data) // 2])
            handler.wfile.flush()
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_WR)
        elif fault.kind == "disconnect":
            handler.close_connection = True
        else:  # pragma: no cover - guarded by the constructors
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    def _route(
        self,
        route: str,
        params: Mapping[str, str],
        body: Any,
        form: dict[str, Any] | None,
        fault: Fault | None = None,
    ) -> tuple[int, Any]:
        """Runs the endpoint logic; returns (status, JSON payload or (bytes, content type))."""
        if route == "chat.completions.create":
            return 200, self._chat_completion(self._require_object(body), fault)
        if route == "models.list":
            model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "aptforge-standin"}
            return 200, {"object": "list", "data": [model]}
        if route == "files.create":
            return 200, self._create_file(form)
        if route == "files.retrieve":
            return 200, self._get_file(params["id"]).to_json()
        if route == "files.content":
            return 200, (self._get_file(params["id"]).content, "application/octet-stream")
        if route == "batches.create":
            return 200, self._create_openai_batch(self._require_object(body))
        if route == "batches.retrieve":
            return 200, self._poll_openai_batch(params["id"])
        if route == "batches.cancel":
            return 200, self._cancel_openai_batch(params["id"])
        if route == "messages.create":
            return 200, self._message(self._require_object(body), fault=fault)
        if route == "messages.batches.create":
            return 200, self._create_anthropic_batch(self._require_object(body))
        if route == "messages.batches.retrieve":
            return 200, self._poll_anthropic_batch(params["id"])
        if route == "messages.batches.results":
            return 200, (self._anthropic_results(params["id"]), "application/binary")
        if route == "messages.batches.cancel":
            return 200, self._cancel_anthropic_batch(params["id"])
        raise _APIError(404)  # pragma: no cover - every route is handled above

    @staticmethod
    def _require_object(body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _APIError(400, "The request body must be a JSON object.")
        return body

    def _respond(self, api: str, request_json: dict[str, Any]) -> str:
        text = self.responder(api, request_json)
        if not isinstance(text, str):
            raise TypeError(f"responder must return str, got {type(text).__name__}")
        return text

    # -- OpenAI ------------------------------------------------------------- #

    def _chat_completion(self, request_json: dict[str, Any], fault: Fault | None = None) -> dict[str, Any]:
        for field in ("model", "messages"):
            if field not in request_json:
                raise _APIError(
                    400,
                    f"Missing required parameter: '{field}'.",
                    param=field,
                    code="missing_required_parameter",
                )
        if not isinstance(request_json["messages"], list) or not request_json["messages"]:
            raise _APIError(400, "'messages' must be a non-empty array.", param="messages")
        if request_json.get("stream"):
            raise _APIError(400, "Streaming is not supported by the stand-in server.", param="stream")
        text = self._respond(OPENAI, request_json)
        tool = forced_tool(OPENAI, request_json)
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        finish_reason = "stop"
        kind = fault.kind if fault is not None else None
        if kind == "refusal":
            assert fault is not None
            text = fault.message or ""
            message.update(content=None, refusal=text)
            tool = None
        elif kind == "truncated_output":
            assert fault is not None
            text = text[: int(len(text) * (fault.seconds or 0.0))]
            message["content"] = text
            finish_reason = "length"
        if tool is not None:
            if kind != "truncated_output":
                self._check_tool_arguments(tool["name"], text)
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": _new_id("call_"),
                    "type": "function",
                    "function": {"name": tool["name"], "arguments": text},
                }
            ]
            finish_reason = "length" if kind == "truncated_output" else "tool_calls"
        n = int(request_json.get("n") or 1)
        prompt_tokens = _approx_tokens(_prompt_text(request_json))
        completion_tokens = _approx_tokens(text) * n
        return {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request_json.get("model") or self.model_name,
            "choices": [
                {"index": i, "message": message, "logprobs": None, "finish_reason": finish_reason}
                for i in range(n)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_standin",
        }

    @staticmethod
    def _check_tool_arguments(name: str, text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ValueError(
                f"responder must return a JSON object for forced tool {name!r}, got {text[:80]!r}"
            )
        return value

    def _create_file(self, form: dict[str, Any] | None) -> dict[str, Any]:
        if form is None or not isinstance(form.get("file"), bytes):
            raise _APIError(400, "Missing required parameter: 'file'.", param="file")
        purpose = form.get("purpose")
        if not purpose:
            raise _APIError(400, "Missing required parameter: 'purpose'.", param="purpose")
        if purpose == "batch":
            for number, line in enumerate(form["file"].splitlines(), start=1):
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError:
                        raise _APIError(
                            400,
                            f"Invalid file format for Batch API. Line {number} is not valid JSON.",
                            param="file",
                        ) from None
        stored = _StoredFile(
            _new_id("file-"), form.get("file.filename") or "upload", purpose, form["file"], int(time.time())
        )
        with self._lock:
            self._files[stored.id] = stored
        return stored.to_json()

    def _get_file(self, file_id: str) -> _StoredFile:
        with self._lock:
            stored = self._files.get(file_id)
        if stored is None:
            raise _APIError(404, f"No such File object: {file_id}", param="id")
        return stored

    def _create_openai_batch(self, request_json: dict[str, Any]) -> dict[str, Any]:
        for field in ("input_file_id", "endpoint", "completion_window"):
            if not request_json.get(field):
                raise _APIError(400, f"Missing required parameter: '{field}'.", param=field)
        if request_json["endpoint"] != "/v1/chat/completions":
            raise _APIError(
                400,
                f"The stand-in only supports /v1/chat/completions batches, not {request_json['endpoint']}.",
                param="endpoint",
            )
        if request_json["completion_window"] != "24h":
            raise _APIError(
                400, "Invalid completion_window; only '24h' is supported.", param="completion_window"
            )
        stored = self._get_file(request_json["input_file_id"])
        if stored.purpose != "batch":
            raise _APIError(
                400, f"File {stored.id} was not uploaded with purpose 'batch'.", param="input_file_id"
            )
        lines: list[dict[str, Any]] = []
        line_errors: list[dict[str, Any]] = []
        seen_ids = set()
        for number, raw in enumerate(stored.content.splitlines(), start=1):
            if not raw.strip():
                continue
            item = json.loads(raw)
            problem = None
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                problem = "missing custom_id"
            elif item["custom_id"] in seen_ids:
                problem = f"duplicate custom_id {item['custom_id']!r}"
            elif item.get("method") != "POST" or item.get("url") != request_json["endpoint"]:
                problem = f"line must be a POST to {request_json['endpoint']}"
            elif not isinstance(item.get("body"), dict):
                problem = "missing body"
            if problem:
                line_errors.append(
                    {"code": "invalid_request", "line": number, "message": problem, "param": None}
                )
            else:
                seen_ids.add(item["custom_id"])
                lines.append(item)
        now = int(time.time())
        data = {
            "id": _new_id("batch_"),
            "object": "batch",
            "endpoint": request_json["endpoint"],
            "errors": None,
            "input_file_id": stored.id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": request_json.get("metadata"),
        }
        batch = _OpenAIBatch(data=data, lines=lines, line_errors=line_errors)
        with self._lock:
            self._openai_batches[data["id"]] = batch
            return json.loads(json.dumps(data))

    def _get_openai_batch(self, batch_id: str) -> _OpenAIBatch:
        with self._lock:
            batch = self._openai_batches.get(batch_id)
        if batch is None:
            raise _APIError(404, f"No batch found with id '{batch_id}'.", param="batch_id")
        return batch

    def _poll_openai_batch(self, batch_id: str) -> dict[str, Any]:
        """Advances ``validating -> in_progress (N polls) -> finalizing -> completed``."""
        batch = self._get_openai_batch(batch_id)
        data, now = batch.data, int(time.time())
        with self._lock:
            status = data["status"]
            if status == "cancelling":
                data.update(status="cancelled", cancelled_at=now)
            elif status == "validating" and batch.line_errors:
                data.update(
                    status="failed", failed_at=now, errors={"object": "list", "data": batch.line_errors}
                )
            elif status in ("validating", "in_progress"):
                if status == "validating":
                    data.update(status="in_progress", in_progress_at=now)
                    data["request_counts"]["total"] = len(batch.lines)
                if batch.in_progress_polls < self.batch_in_progress_polls:
                    batch.in_progress_polls += 1
                else:
                    # "finalizing" also keeps concurrent polls from finishing twice.
                    data.update(status="finalizing", finalizing_at=now)
                    status = "finalizing"
            snapshot = json.loads(json.dumps(data))
        if status != "finalizing":
            return snapshot
        self._finish_openai_batch(batch)
        with self._lock:
            return json.loads(json.dumps(data))

    def _finish_openai_batch(self, batch: _OpenAIBatch) -> None:
        outputs, failures = [], []
        for item in batch.lines:
            body = dict(item["body"])
            try:
                completion = self._chat_completion(body)
                status, response_body = 200, completion
            except _APIError as exc:
                status, response_body = (
                    exc.status,
                    _error_body(OPENAI, exc.status, exc.message, param=exc.param),
                )
            except Exception as exc:
                status, response_body = 500, _error_body(OPENAI, 500, f"{type(exc).__name__}: {exc}")
            line = {
                "id": _new_id("batch_req_"),
                "custom_id": item["custom_id"],
                "response": {"status_code": status, "request_id": _new_id("req_"), "body": response_body},
                "error": None,
            }
            (outputs if status == 200 else failures).append(line)
        now = int(time.time())
        batch_id = batch.data["id"]
        output_id = error_id = None
        with self._lock:
            if outputs:
                output_id = _new_id("file-")
                self._files[output_id] = _StoredFile(
                    output_id, f"{batch_id}_output.jsonl", "batch_output", _jsonl(outputs), now
                )
            if failures:
                error_id = _new_id("file-")
                self._files[error_id] = _StoredFile(
                    error_id, f"{batch_id}_error.jsonl", "batch_output", _jsonl(failures), now
                )
            batch.data.update(
                status="completed",
                completed_at=now,
                output_file_id=output_id,
                error_file_id=error_id,
                request_counts={
                    "total": len(batch.lines),
                    "completed": len(outputs),
                    "failed": len(failures),
                },
            )

    def _cancel_openai_batch(self, batch_id: str) -> dict[str, Any]:
        batch = self._get_openai_batch(batch_id)
        with self._lock:
            if batch.data["status"] in ("validating", "in_progress"):
                batch.data.update(status="cancelling", cancelling_at=int(time.time()))
            elif batch.data["status"] not in ("cancelling", "cancelled"):
                raise _APIError(409, f"Cannot cancel a batch with status '{batch.data['status']}'.")
            return json.loads(json.dumps(batch.data))

    # -- Anthropic ---------------------------------------------------------- #

    def _message(
        self, request_json: dict[str, Any], *, service_tier: str = "standard", fault: Fault | None = None
    ) -> dict[str, Any]:
        for field in ("model", "messages", "max_tokens"):
            if field not in request_json:
                raise _APIError(400, f"{field}: Field required")
        if not isinstance(request_json["messages"], list) or not request_json["messages"]:
            raise _APIError(400, "messages: at least one message is required")
        if request_json.get("stream"):
            raise _APIError(400, "stream: streaming is not supported by the stand-in server")
        text = self._respond(ANTHROPIC, request_json)
        tool = forced_tool(ANTHROPIC, request_json)
        kind = fault.kind if fault is not None else None
        stop_details: dict[str, Any] | None = None
        if kind == "refusal":
            assert fault is not None
            text = fault.message or ""
            content: list[dict[str, Any]] = [{"type": "text", "text": text, "citations": None}]
            stop_reason = "refusal"
            stop_details = {"type": "refusal", "category": None, "explanation": text}
        elif kind == "truncated_output":
            assert fault is not None
            text = text[: int(len(text) * (fault.seconds or 0.0))]
            if tool is not None:
                block = {"type": "tool_use", "id": _new_id("toolu_"), "name": tool["name"], "input": {}}
                content = [block]
            else:
                content = [{"type": "text", "text": text, "citations": None}]
            stop_reason = "max_tokens"
        elif tool is not None:
            content = [
                {
                    "type": "tool_use",
                    "id": _new_id("toolu_"),
                    "name": tool["name"],
                    "input": self._check_tool_arguments(tool["name"], text),
                }
            ]
            stop_reason = "tool_use"
        else:
            content = [{"type": "text", "text": text, "citations": None}]
            stop_reason = "end_turn"
        return {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": request_json.get("model") or self.model_name,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": stop_details,
            "container": None,
            "usage": {
                "input_tokens": _approx_tokens(_prompt_text(request_json)),
                "output_tokens": _approx_tokens(text),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "service_tier": service_tier,
            },
        }

    def _create_anthropic_batch(self, request_json: dict[str, Any]) -> dict[str, Any]:
        requests = request_json.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _APIError(400, "requests: at least one request is required")
        seen = set()
        for index, item in enumerate(requests):
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                raise _APIError(400, f"requests.{index}.custom_id: Field required")
            if not isinstance(item.get("params"), dict):
                raise _APIError(400, f"requests.{index}.params: Field required")
            if item["custom_id"] in seen:
                raise _APIError(400, f"requests.{index}.custom_id: duplicate custom_id {item['custom_id']!r}")
            seen.add(item["custom_id"])
        now = time.time()
        data = {
            "id": _new_id("msgbatch_"),
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": None,
            "created_at": _rfc3339(now),
            "expires_at": _rfc3339(now + timedelta(days=1).total_seconds()),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        with self._lock:
            self._anthropic_batches[data["id"]] = _AnthropicBatch(data=data, requests=requests)
            return json.loads(json.dumps(data))

    def _get_anthropic_batch(self, batch_id: str) -> _AnthropicBatch:
        with self._lock:
            batch = self._anthropic_batches.get(batch_id)
        if batch is None:
            raise _APIError(404, f"Message batch {batch_id} not found.")
        return batch

    def _poll_anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        """Advances ``in_progress (N polls) -> ended`` (``canceling -> ended``)."""
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            status = batch.data["processing_status"]
            finish = False
            if not batch.finishing and status == "canceling":
                finish = True
            elif not batch.finishing and status == "in_progress":
                if batch.in_progress_polls < self.batch_in_progress_polls:
                    batch.in_progress_polls += 1
                else:
                    finish = True
            batch.finishing = batch.finishing or finish
            snapshot = json.loads(json.dumps(batch.data))
        if not finish:
            return snapshot
        self._finish_anthropic_batch(batch, canceled=(status == "canceling"))
        with self._lock:
            return json.loads(json.dumps(batch.data))

    def _finish_anthropic_batch(self, batch: _AnthropicBatch, *, canceled: bool) -> None:
        lines = []
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for item in batch.requests:
            if canceled:
                result: dict[str, Any] = {"type": "canceled"}
                counts["canceled"] += 1
            else:
                try:
                    result = {
                        "type": "succeeded",
                        "message": self._message(dict(item["params"]), service_tier="batch"),
                    }
                    counts["succeeded"] += 1
                except _APIError as exc:
                    result = {
                        "type": "errored",
                        "error": _error_body(ANTHROPIC, exc.status, exc.message, request_id=_new_id("req_")),
                    }
                    counts["errored"] += 1
                except Exception as exc:
                    message = f"{type(exc).__name__}: {exc}"
                    result = {
                        "type": "errored",
                        "error": _error_body(ANTHROPIC, 500, message, request_id=_new_id("req_")),
                    }
                    counts["errored"] += 1
            lines.append({"custom_id": item["custom_id"], "result": result})
        with self._lock:
            batch.results = _jsonl(lines)
            batch.data.update(
                processing_status="ended",
                ended_at=_rfc3339(time.time()),
                request_counts=counts,
                results_url=f"{self.base_url}/v1/messages/batches/{batch.data['id']}/results",
            )

    def _anthropic_results(self, batch_id: str) -> bytes:
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            if batch.results is None:
                raise _APIError(
                    404, f"Message batch {batch_id} has not finished processing; results are unavailable."
                )
            return batch.results

    def _cancel_anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            if batch.data["processing_status"] == "in_progress" and not batch.finishing:
                batch.data.update(processing_status="canceling", cancel_initiated_at=_rfc3339(time.time()))
            return json.loads(json.dumps(batch.data))


def _jsonl(items: list[dict[str, Any]]) -> bytes:
    """Serialises items as JSON Lines (one object per line, newline-terminated)."""
    return b"".join(json.dumps(item).encode("utf-8") + b"\n" for item in items)


def main(argv: list[str] | None = None) -> None:
    """Serves the stand-in until interrupted; prints its base URL on the first line.

    Args:
        argv: Command-line arguments (``--latency``, ``--responder``, ``--api-key``,
            ``--batch-polls``); ``sys.argv`` when None.
    """
    import argparse

    parser = argparse.ArgumentParser(description="aptforge's stand-in OpenAI + Anthropic server")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="distractors")
    parser.add_argument("--api-key", default=None, help="accepted key (default: any non-empty key)")
    parser.add_argument("--batch-polls", type=int, default=1, help="polls a batch stays in progress")
    args = parser.parse_args(argv)
    server = LLMStandInServer(
        responder=RESPONDERS[args.responder],
        openai_api_key=args.api_key,
        anthropic_api_key=args.api_key,
        latency=args.latency,
        batch_in_progress_polls=args.batch_polls,
    ).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
