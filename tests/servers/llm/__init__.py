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

from tests.servers.llm.faults import Fault
from tests.servers.llm.protocol import ANTHROPIC, OPENAI, ROUTES, Responder
from tests.servers.llm.requests import RecordedRequest, forced_tool, last_user_text, requested_schema
from tests.servers.llm.responders import RESPONDERS, default_responder, distractor_responder
from tests.servers.llm.schema_fill import schema_instance
from tests.servers.llm.server import LLMStandInServer

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
