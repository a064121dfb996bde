"""Chat completions (OpenAI) and messages (Anthropic) of the stand-in LLM server, with forced tools and schemas."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.servers.llm.faults import Fault
from tests.servers.llm.protocol import ANTHROPIC, OPENAI
from tests.servers.llm.requests import forced_tool
from tests.servers.llm.wire import _APIError, _approx_tokens, _new_id, _prompt_text


class _RepliesMixin:
    """Builds chat completion and message replies."""

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
