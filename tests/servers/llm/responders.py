"""Responders of the stand-in LLM server: the text an assistant reply carries (default and distractor lists)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tests.servers.llm.protocol import Responder
from tests.servers.llm.requests import last_user_text, requested_schema
from tests.servers.llm.schema_fill import schema_instance


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


UNUSABLE_EVERY = 8
"""`flaky_distractor_responder` answers about one first attempt in this many with prose."""
_REPAIR_NOTE = "Your previous reply could not be used"
UNUSABLE_REPLY = "Here are a few ideas: look at the tokenizer, then the parser."
"""The prose a flaky first attempt gets (no JSON: the client must re-ask)."""


def unusable_first_reply(text: str) -> bool:
    """Whether `flaky_distractor_responder` answers this last user text with prose: about 1 in
    `UNUSABLE_EVERY` first attempts, chosen by the text's SHA-256; never a re-ask (which carries the
    client's repair note), so every item succeeds by its second attempt."""
    if _REPAIR_NOTE in text:
        return False
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[16:24], 16) % UNUSABLE_EVERY == 0


def flaky_distractor_responder(api: str, request_json: dict[str, Any]) -> str:
    """`distractor_responder`, except that about one first attempt in `UNUSABLE_EVERY` gets
    `UNUSABLE_REPLY` (see `unusable_first_reply`): re-asks on the critical path, deterministically."""
    if unusable_first_reply(last_user_text(api, request_json)):
        return UNUSABLE_REPLY
    return distractor_responder(api, request_json)


RESPONDERS: dict[str, Responder] = {
    "default": default_responder,
    "distractors": distractor_responder,
    "flaky_distractors": flaky_distractor_responder,
}
"""Responders by name, for the standalone server (``--responder``)."""
