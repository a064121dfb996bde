"""OpenAI distractors: chat completions with a strict JSON-schema `response_format`.

Why: OpenAI's structured outputs make the model's reply a `{"distractors": [...]}` object by
construction, so `parse()` rarely fails; a forced function tool, plain JSON mode or a prompt-only
reply are available for models or servers without it (`generator.structured_output`).

Reads / produces: as `generators.llm.generator` (one Question or Problem per gold step).
`build_prompt(step, n, attempt, failure)` and `parse(text, step)` are pure; `request_body` below is
the only OpenAI-specific part. Temperature is sent only when configured (reasoning models refuse it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from generators.llm.generator import LLMDistractorGenerator
from generators.llm.prompting import Prompt, distractor_schema

TOOL_NAME = "record_distractors"


def openai_body(
    prompt: Prompt,
    *,
    model: str,
    max_tokens: int,
    temperature: float | None = None,
    structured: str = "json_schema",
    token_param: str = "max_completion_tokens",
) -> dict[str, Any]:
    """The `chat.completions.create` keyword arguments of a prompt (pure).

    Args:
        prompt: Rendered system and user text.
        model: Model id.
        max_tokens: Output token limit.
        temperature: Sampling temperature; omitted when None.
        structured: `json_schema` (strict `response_format`), `tool` (forced function),
            `json_object` (JSON mode) or `none`.
        token_param: `max_completion_tokens` (OpenAI) or `max_tokens` (most compatible servers).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
        token_param: max_tokens,
    }
    if temperature is not None:
        body["temperature"] = temperature
    if structured == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "distractors", "strict": True, "schema": distractor_schema()},
        }
    elif structured == "tool":
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": TOOL_NAME,
                    "description": "Record the wrong options.",
                    "strict": True,
                    "parameters": distractor_schema(),
                },
            }
        ]
        body["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
    elif structured == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif structured != "none":
        raise ValueError(f"unknown structured output mode {structured!r}")
    return body


class OpenAIGenerator(LLMDistractorGenerator):
    """Distractors from the OpenAI API (`openai.AsyncOpenAI`)."""

    name = "openai"
    version = 1
    provider = "openai"
    default_model: ClassVar[str | None] = "gpt-4.1-mini"
    token_param: ClassVar[str] = "max_completion_tokens"

    def request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        """Chat-completions body of a rendered prompt (pure)."""
        return openai_body(
            prompt,
            model=self.model,
            max_tokens=max_tokens,
            temperature=self.temperature,
            structured=self.structured,
            token_param=self.token_param,
        )


__all__ = ["TOOL_NAME", "OpenAIGenerator", "openai_body"]
