"""Distractors from any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, LiteLLM...).

Why: local and self-hosted models speak the chat-completions protocol at their own `base_url`; the
OpenAI generator works for them with three differences handled here: the output limit is sent as
`max_tokens` (what these servers read), replies are cached under their own provider name (a local
"llama" never answers for OpenAI's), and when no model is configured the server's first listed
model is used (`discover_model`, called by the flow at the edge, the only I/O here).

Typical endpoints (`generator.base_url` or `OPENAI_BASE_URL`): vLLM `vllm serve <model>` at
`http://127.0.0.1:8000/v1`; SGLang `python -m sglang.launch_server` at `http://127.0.0.1:30000/v1`;
Ollama at `http://127.0.0.1:11434/v1`. No key is needed unless the server asks for one
(`OPENAI_API_KEY`). All three accept `response_format` with a JSON schema (structured output via
guided decoding); for a server that does not, set `generator.structured_output: none` and the
prompt alone asks for the JSON, which `parse()` reads from fenced or wrapped replies too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from generators.llm.openai_gen import OpenAIGenerator

if TYPE_CHECKING:
    import openai


class OpenAICompatibleGenerator(OpenAIGenerator):
    """Distractors from an OpenAI-compatible server at a configured `base_url`."""

    name = "openai-compatible"
    version = 1
    provider = "openai-compatible"
    default_model: ClassVar[str | None] = None
    token_param: ClassVar[str] = "max_tokens"


def discover_model(client: openai.OpenAI) -> str:
    """The first model the server lists (`GET /v1/models`).

    Raises:
        ValueError: the server lists no model.
    """
    models = [m.id for m in client.models.list()]
    if not models:
        raise ValueError("the OpenAI-compatible server lists no model; set generator.model")
    return models[0]


__all__ = ["OpenAICompatibleGenerator", "discover_model"]
