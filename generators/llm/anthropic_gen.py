"""Anthropic distractors: the Messages API with a forced tool (default) or native structured output.

Why: Claude returns a `{"distractors": [...]}` object reliably when made to call one tool whose
input schema is the reply schema; this works on every Claude model and on Anthropic-compatible
proxies. anthropic 2.x also offers structured output (`output_config={"format": {"type":
"json_schema", ...}}`), selected with `generator.structured_output: json_schema` for models that
support it. A refusal (`stop_reason: "refusal"`) and a cut reply (`"max_tokens"`) are read by the
shared layer.

Reads / produces: as `generators.llm.generator`. `build_prompt` and `parse` are pure; `request_body`
below is the only Anthropic-specific part.
"""

from __future__ import annotations

from typing import Any, ClassVar

from generators.llm.generator import LLMDistractorGenerator
from generators.llm.prompting import Prompt, distractor_schema

TOOL_NAME = "record_distractors"


def anthropic_body(
    prompt: Prompt, *, model: str, max_tokens: int, temperature: float | None = None, structured: str = "tool"
) -> dict[str, Any]:
    """The `messages.create` keyword arguments of a prompt (pure).

    Args:
        prompt: Rendered system and user text.
        model: Model id.
        max_tokens: Output token limit.
        temperature: Sampling temperature; omitted when None.
        structured: `tool` (forced tool), `json_schema` (`output_config.format`) or `none`.
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "system": prompt.system,
        "messages": [{"role": "user", "content": prompt.user}],
    }
    if temperature is not None:
        body["temperature"] = temperature
    if structured == "tool":
        body["tools"] = [
            {
                "name": TOOL_NAME,
                "description": "Record the wrong options.",
                "input_schema": distractor_schema(),
            }
        ]
        body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
    elif structured == "json_schema":
        body["output_config"] = {"format": {"type": "json_schema", "schema": distractor_schema()}}
    elif structured not in ("none", "json_object"):
        raise ValueError(f"unknown structured output mode {structured!r}")
    return body


class AnthropicGenerator(LLMDistractorGenerator):
    """Distractors from the Anthropic API (`anthropic.AsyncAnthropic`)."""

    name = "anthropic"
    version = 1
    provider = "anthropic"
    default_model: ClassVar[str | None] = "claude-haiku-4-5"

    def request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        """Messages body of a rendered prompt (pure)."""
        return anthropic_body(
            prompt,
            model=self.model,
            max_tokens=max_tokens,
            temperature=self.temperature,
            structured=self.structured,
        )


__all__ = ["TOOL_NAME", "AnthropicGenerator", "anthropic_body"]
