"""Wire constants of the stand-in LLM server: API names, route table, error types and messages, the Responder type."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

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
