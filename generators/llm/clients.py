"""Adapters from the official SDKs to `generators.llm.engine.LLMClient`: OpenAI chat completions, Anthropic messages.

Why: the rest of the LLM layer must not care which provider answers. Each adapter sends a request
body with the async SDK client it is given (so auth, HTTP retries, `Retry-After` and timeouts are the
SDK's), reduces the reply to an `LLMReply` (text, refusal, finish, tokens, model) and translates
every SDK error into an `LLMFailure` with a snake_case reason. The same reply readers serve batch
results, which arrive as plain JSON.

The bodies are plain JSON already, so the adapters send them with the SDK's documented raw call
(`client.post(path, body=..., cast_to=httpx2.Response)`, the SDKs' way to reach any endpoint) and
read the reply with orjson: the typed `create()` would spend about 0.7 ms of client CPU per request
transforming the params and building response models (measured: 1.7 vs 1.0 s per 1,000 requests),
which is what limits throughput on a 2-core machine. Retries, errors and timeouts are identical.

Guarantees: no exception other than `LLMFailure` leaves `send()`: a malformed JSON body (a bare
`json.JSONDecodeError` from the SDKs) becomes the retryable `llm_malformed_response`; bad keys,
missing permissions and unknown models are marked fatal (no point in sending more).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx2
import orjson

from generators.llm.engine import InvalidOutput, LLMFailure, LLMReply

if TYPE_CHECKING:
    import anthropic
    import openai


def _sdk_errors(*names: str) -> tuple[type[BaseException], ...]:
    """Exception classes of the SDKs loaded so far (an SDK never imported cannot have raised)."""
    return tuple(
        getattr(sys.modules[sdk], name)
        for sdk in ("openai", "anthropic")
        if sdk in sys.modules
        for name in names
    )


def translate_error(exc: BaseException) -> LLMFailure:
    """The `LLMFailure` an SDK exception stands for (after the SDK's own retries)."""
    if isinstance(exc, LLMFailure):
        return exc
    if isinstance(exc, _sdk_errors("APITimeoutError")):
        return LLMFailure("llm_timeout", f"request timed out after the SDK's retries: {exc}")
    if isinstance(exc, (*_sdk_errors("APIConnectionError"), httpx2.HTTPError)):
        return LLMFailure("llm_connection_error", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, _sdk_errors("APIStatusError")):
        status = getattr(exc, "status_code", 0)
        message = f"HTTP {status}: {getattr(exc, 'message', '') or exc}"
        if isinstance(exc, _sdk_errors("AuthenticationError", "PermissionDeniedError", "NotFoundError")):
            return LLMFailure("llm_unavailable", message, fatal=True)
        if isinstance(exc, _sdk_errors("RateLimitError")):
            return LLMFailure("llm_rate_limited", f"still rate limited after the SDK's retries: {message}")
        return LLMFailure("llm_error", message)
    if isinstance(exc, ValueError):  # json.JSONDecodeError from the SDK's response parsing
        return InvalidOutput("llm_malformed_response", f"the response body was not valid JSON: {exc}")
    return LLMFailure("llm_error", f"{type(exc).__name__}: {exc}")


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK model or of its JSON form."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def reply_from_openai(completion: Any, *, batch: bool = False) -> LLMReply:
    """Reduce a chat completion (SDK object or JSON) to an `LLMReply`.

    A forced tool call's arguments stand in for the text; `finish_reason: content_filter` counts as
    a refusal.
    """
    usage = _get(completion, "usage")
    tokens_in = int(_get(usage, "prompt_tokens") or 0) if usage is not None else 0
    tokens_out = int(_get(usage, "completion_tokens") or 0) if usage is not None else 0
    model = str(_get(completion, "model") or "")
    choices = _get(completion, "choices") or []
    if not choices:
        return LLMReply(None, None, "empty", tokens_in, tokens_out, model, batch)
    choice = choices[0]
    message = _get(choice, "message")
    text = _get(message, "content") if message is not None else None
    calls = (_get(message, "tool_calls") if message is not None else None) or []
    if text is None and calls:
        text = _get(_get(calls[0], "function"), "arguments")
    refusal = _get(message, "refusal") if message is not None else None
    finish = str(_get(choice, "finish_reason") or "stop")
    if finish == "content_filter" and refusal is None:
        refusal = "the provider's content filter stopped the reply (finish_reason=content_filter)"
    return LLMReply(
        text, refusal, "refusal" if refusal is not None else finish, tokens_in, tokens_out, model, batch
    )


def reply_from_anthropic(message: Any, *, batch: bool = False) -> LLMReply:
    """Reduce an Anthropic message (SDK object or JSON) to an `LLMReply`.

    A `tool_use` block's input (JSON text) stands in for the text; `stop_reason: refusal` is a
    refusal, `max_tokens` a cut reply.
    """
    usage = _get(message, "usage")
    tokens_in = int(_get(usage, "input_tokens") or 0) if usage is not None else 0
    tokens_out = int(_get(usage, "output_tokens") or 0) if usage is not None else 0
    stop = str(_get(message, "stop_reason") or "end_turn")
    texts: list[str] = []
    tool_input: Any = None
    for block in _get(message, "content") or []:
        kind = _get(block, "type")
        if kind == "text":
            texts.append(str(_get(block, "text") or ""))
        elif kind == "tool_use":
            tool_input = _get(block, "input")
    text = json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else ("".join(texts) or None)
    refusal = ("".join(texts) or "the model refused (stop_reason=refusal)") if stop == "refusal" else None
    finish = {"max_tokens": "length", "refusal": "refusal"}.get(stop, "stop")
    return LLMReply(text, refusal, finish, tokens_in, tokens_out, str(_get(message, "model") or ""), batch)


class OpenAIChat:
    """`LLMClient` over `openai.AsyncOpenAI().chat.completions` (OpenAI and compatible servers)."""

    provider = "openai"

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client

    async def send(self, body: dict[str, Any]) -> LLMReply:
        """One chat completion (`POST {base_url}/chat/completions`)."""
        try:
            response = await self.client.post("/chat/completions", body=body, cast_to=httpx2.Response)
            data = orjson.loads(response.content)
        except Exception as exc:
            raise translate_error(exc) from exc
        return reply_from_openai(data)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.close()


class AnthropicMessages:
    """`LLMClient` over `anthropic.AsyncAnthropic().messages`."""

    provider = "anthropic"

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        self.client = client

    async def send(self, body: dict[str, Any]) -> LLMReply:
        """One message (`POST {base_url}/v1/messages`)."""
        try:
            response = await self.client.post("/v1/messages", body=body, cast_to=httpx2.Response)
            data = orjson.loads(response.content)
        except Exception as exc:
            raise translate_error(exc) from exc
        return reply_from_anthropic(data)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.close()


def reply_from(provider: str, data: Mapping[str, Any], *, batch: bool = False) -> LLMReply:
    """Read a JSON reply of either provider."""
    reader = reply_from_anthropic if provider == "anthropic" else reply_from_openai
    return reader(dict(data), batch=batch)


__all__ = [
    "AnthropicMessages",
    "OpenAIChat",
    "reply_from",
    "reply_from_anthropic",
    "reply_from_openai",
    "translate_error",
]
