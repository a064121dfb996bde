"""What the stand-in LLM server records of a request, and readers of request bodies (last user text, forced tool, schema)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tests.servers.llm.protocol import OPENAI


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
