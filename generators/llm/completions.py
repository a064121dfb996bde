"""Text completions (`POST /v1/completions`) on the official openai SDK: how base models are scored.

Why: a base model is evaluated on raw text, never through a chat template, and log-likelihood
scoring needs the prompt's own token log-probabilities (`echo: true`, `logprobs`), which only the
legacy completions endpoint returns; vLLM, SGLang, llama.cpp's server and TGI all serve it. The
adapter plugs into `generators.llm.engine.LLMEngine` like the chat adapters do, so evaluation gets the
same limiter, SDK retries, SQLite cache (a rerun sends nothing) and ledger.

Guarantees: the reply keeps the text, the finish reason, the token counts and, when asked for, the
log-probabilities, trimmed to what scoring reads: a request body may carry the local key
`aptforge_score_from` (a character offset into the prompt; it is part of the cache key and is never
sent), and only the tokens at or after that offset are kept, so an echoed 100K-character prompt is
not stored token by token. Errors are translated as in `generators.llm.clients`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import orjson

from generators.llm.clients import translate_error
from generators.llm.engine import LLMReply

if TYPE_CHECKING:
    import openai

#: Local request key: keep log-probabilities of tokens from this character offset on (never sent).
SCORE_FROM = "aptforge_score_from"


def trim_logprobs(logprobs: dict[str, Any] | None, start: int) -> dict[str, Any] | None:
    """The `logprobs` of the tokens whose `text_offset` is at least `start` (pure)."""
    if not logprobs:
        return None
    offsets = list(logprobs.get("text_offset") or [])
    keep = [i for i, o in enumerate(offsets) if o >= start] if offsets else []
    out: dict[str, Any] = {}
    for name in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        values = logprobs.get(name)
        out[name] = [values[i] for i in keep] if isinstance(values, list) else None
    return out


def reply_from_completion(data: dict[str, Any], score_from: int | None) -> LLMReply:
    """Reduce a completions response (JSON) to an `LLMReply` (first choice)."""
    usage = data.get("usage") or {}
    choices = data.get("choices") or []
    model = str(data.get("model") or "")
    tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    if not choices:
        return LLMReply(None, None, "empty", tokens_in, tokens_out, model)
    choice = choices[0]
    logprobs = choice.get("logprobs")
    if score_from is not None:
        logprobs = trim_logprobs(logprobs, score_from)
    finish = str(choice.get("finish_reason") or "stop")
    return LLMReply(
        str(choice.get("text") or ""), None, finish, tokens_in, tokens_out, model, logprobs=logprobs
    )


class OpenAICompletions:
    """`LLMClient` over `openai.AsyncOpenAI().completions` (any OpenAI-compatible completions server)."""

    provider = "openai-completions"

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client

    async def send(self, body: dict[str, Any]) -> LLMReply:
        """One completion (`POST {base_url}/completions`), the local key stripped."""
        score_from = body.get(SCORE_FROM)
        wire = {k: v for k, v in body.items() if k != SCORE_FROM}
        try:
            response = await self.client.post("/completions", body=wire, cast_to=httpx2.Response)
            data = orjson.loads(response.content)
        except Exception as exc:
            raise translate_error(exc) from exc
        return reply_from_completion(data, score_from)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.close()


__all__ = ["SCORE_FROM", "OpenAICompletions", "reply_from_completion", "trim_logprobs"]
