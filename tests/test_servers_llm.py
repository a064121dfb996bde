"""Tests for the stand-in LLM server, driven through the real OpenAI/Anthropic SDKs.

These pin down both the stand-in's wire behaviour and the SDK behaviour the
project relies on (retries, ``retry-after``, timeouts, error mapping), so an SDK
upgrade that changes any of it shows up here first.  Delays are kept small so
the whole file runs in a few seconds.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pydantic
import pytest

from generators.llm.clients import translate_error
from tests.servers.llm import (
    ANTHROPIC,
    OPENAI,
    ROUTES,
    Fault,
    LLMStandInServer,
    default_responder,
    distractor_responder,
    last_user_text,
)

API_KEY = "test-key"
MESSAGES = [{"role": "user", "content": "Summarise the release notes."}]
CHAT = "chat.completions.create"
MESSAGES_ROUTE = "messages.create"


@pytest.fixture
def server() -> Iterator[LLMStandInServer]:
    """A running stand-in server, stopped after the test."""
    with LLMStandInServer(openai_api_key=API_KEY, anthropic_api_key=API_KEY) as running:
        yield running


def openai_client(server: LLMStandInServer, **kwargs: object) -> openai.OpenAI:
    """A real OpenAI client pointed at the stand-in (2 s timeout unless given)."""
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("timeout", 2.0)
    return openai.OpenAI(base_url=server.openai_base_url, **kwargs)  # type: ignore[arg-type]


def anthropic_client(server: LLMStandInServer, **kwargs: object) -> anthropic.Anthropic:
    """A real Anthropic client pointed at the stand-in (2 s timeout unless given)."""
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("timeout", 2.0)
    return anthropic.Anthropic(base_url=server.anthropic_base_url, **kwargs)  # type: ignore[arg-type]


def chat(client: openai.OpenAI) -> openai.types.chat.ChatCompletion:
    """Sends the standard test prompt as a chat completion."""
    return client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]


def message(client: anthropic.Anthropic) -> anthropic.types.Message:
    """Sends the standard test prompt as an Anthropic message."""
    return client.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- #
# OpenAI chat completions
# --------------------------------------------------------------------------- #


def test_openai_chat_completion_round_trip(server: LLMStandInServer) -> None:
    completion = chat(openai_client(server))

    expected = default_responder(OPENAI, {"messages": MESSAGES})
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "gpt-test"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == expected
    assert completion.choices[0].finish_reason == "stop"
    assert json.loads(expected)["echo"] == MESSAGES[0]["content"]
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )

    (recorded,) = server.requests
    assert (recorded.method, recorded.path, recorded.route, recorded.api) == (
        "POST",
        "/v1/chat/completions",
        CHAT,
        OPENAI,
    )
    assert recorded.json == {"model": "gpt-test", "messages": MESSAGES}
    assert recorded.authenticated and recorded.status == 200
    assert "authorization" not in recorded.headers
    assert recorded.headers["x-stainless-retry-count"] == "0"


class Verdict(pydantic.BaseModel):
    """Structured-output model used by the json_schema tests."""

    label: str
    score: int
    tags: list[str]


def test_openai_json_schema_structured_output(server: LLMStandInServer) -> None:
    client = openai_client(server)
    schema = Verdict.model_json_schema()
    schema["additionalProperties"] = False
    completion = client.chat.completions.create(
        model="gpt-test",
        messages=MESSAGES,  # type: ignore[arg-type]
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": schema, "strict": True},
        },
    )
    verdict = Verdict.model_validate_json(completion.choices[0].message.content or "")
    assert verdict.tags and isinstance(verdict.score, int)
    assert server.requests[0].json["response_format"]["json_schema"]["name"] == "verdict"

    # The SDK's own structured-output helper builds the schema and validates the reply.
    parsed = client.chat.completions.parse(model="gpt-test", messages=MESSAGES, response_format=Verdict)  # type: ignore[arg-type]
    assert parsed.choices[0].message.parsed == verdict  # same prompt -> same deterministic answer


def test_openai_forced_tool_returns_tool_call(server: LLMStandInServer) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "record",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
    completion = openai_client(server).chat.completions.create(
        model="gpt-test",
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=[tool],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "record"}},
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "record"
    assert isinstance(json.loads(call.function.arguments)["n"], int)


def test_responder_is_pluggable_and_its_errors_become_500(server: LLMStandInServer) -> None:
    seen = []

    def responder(api: str, request_json: dict) -> str:
        seen.append(api)
        if "boom" in last_user_text(api, request_json):
            raise RuntimeError("scripted failure")
        return f"{api}: {last_user_text(api, request_json)}"

    server.responder = responder
    client = openai_client(server, max_retries=0)
    assert chat(client).choices[0].message.content == f"openai: {MESSAGES[0]['content']}"
    assert message(anthropic_client(server)).content[0].text == f"anthropic: {MESSAGES[0]['content']}"  # type: ignore[union-attr]

    with pytest.raises(openai.InternalServerError, match="scripted failure"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "boom"}])
    assert seen == [OPENAI, ANTHROPIC, OPENAI]


# --------------------------------------------------------------------------- #
# Retries, timeouts and broken responses
# --------------------------------------------------------------------------- #


def test_openai_retries_429_honouring_retry_after(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.rate_limit(retry_after=0.2))

    completion = chat(openai_client(server, max_retries=2))

    assert completion.choices[0].message.content
    first, second = server.requests_for(CHAT)
    assert (first.status, first.fault, second.status, second.fault) == (429, "status", 200, None)
    # Without the header the SDK would back off 0.375-0.5 s, so the upper bound
    # shows the 0.2 s came from `retry-after`.
    assert 0.2 <= second.received_at - first.received_at < 0.375
    assert second.headers["x-stainless-retry-count"] == "1"
    assert server.pending_faults() == 0


def test_openai_429_body_and_headers_without_retries(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.rate_limit(retry_after=0.2))

    with pytest.raises(openai.RateLimitError) as caught:
        chat(openai_client(server, max_retries=0))

    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.type == "requests"
    assert caught.value.response.headers["retry-after"] == "0.2"
    assert caught.value.request_id and caught.value.request_id.startswith("req_")
    assert server.count(CHAT) == 1


def test_openai_refuses_retry_after_above_two_minutes(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.rate_limit(retry_after=121))

    started = time.monotonic()
    with pytest.raises(openai.RateLimitError):
        chat(openai_client(server, max_retries=2))

    assert time.monotonic() - started < 1.0
    assert server.count(CHAT) == 1


def test_openai_retries_500_then_succeeds(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.server_error(500))

    completion = chat(openai_client(server, max_retries=1))

    assert completion.choices[0].message.content
    assert [r.status for r in server.requests_for(CHAT)] == [500, 200]


def test_x_should_retry_header_overrides_status_policy(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.error(500, should_retry=False))
    with pytest.raises(openai.InternalServerError):
        chat(openai_client(server, max_retries=2))
    assert server.count(CHAT) == 1

    server.add_faults(CHAT, Fault.error(400, should_retry=True, retry_after_ms=10))
    assert chat(openai_client(server, max_retries=1)).choices[0].message.content
    assert [r.status for r in server.requests_for(CHAT)] == [500, 400, 200]


def test_openai_timeout_raises_api_timeout_error(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.timeout())

    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        chat(openai_client(server, max_retries=0, timeout=0.3))

    assert 0.3 <= time.monotonic() - started < 2.0
    assert server.count(CHAT) == 1


def test_openai_retries_a_timeout(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.timeout())

    assert chat(openai_client(server, max_retries=1, timeout=0.3)).choices[0].message.content
    assert [r.status for r in server.requests_for(CHAT)] == [None, 200]


def test_malformed_json_escapes_as_json_decode_error(server: LLMStandInServer) -> None:
    # Both SDKs call `json.loads` on a 2xx `application/json` body without
    # wrapping the failure: callers get a bare ValueError, and it is not retried.
    server.add_faults(CHAT, Fault.malformed_json())
    with pytest.raises(json.JSONDecodeError) as caught:
        chat(openai_client(server, max_retries=2))
    assert not isinstance(caught.value, openai.OpenAIError)
    assert server.count(CHAT) == 1

    server.add_faults(MESSAGES_ROUTE, Fault.malformed_json())
    with pytest.raises(json.JSONDecodeError):
        message(anthropic_client(server, max_retries=2))
    assert server.count(MESSAGES_ROUTE) == 1


def test_truncated_body_and_disconnect_raise_connection_errors(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.truncated_body(), Fault.disconnect())
    client = openai_client(server, max_retries=0)
    for _ in range(2):
        with pytest.raises(openai.APIConnectionError) as caught:
            chat(client)
        assert not isinstance(caught.value, openai.APITimeoutError)

    server.add_faults(MESSAGES_ROUTE, Fault.truncated_body())
    with pytest.raises(anthropic.APIConnectionError):
        message(anthropic_client(server, max_retries=0))
    assert [r.fault for r in server.requests] == ["truncated_body", "disconnect", "truncated_body"]


def test_a_held_request_stays_in_flight_until_reset_then_is_dropped(server: LLMStandInServer) -> None:
    """`hold`: the route's nth request is logged and never answered, however long the client
    waits (here past its own timeout); `reset` lets it go without an answer, and later requests
    are answered again."""
    server.hold(CHAT, 2)
    client = openai_client(server, max_retries=0, timeout=0.5)
    chat(client)  # the first: answered
    with pytest.raises(openai.APITimeoutError):
        chat(client)  # the second: held
    assert server.count(CHAT) == 2 and [r.status for r in server.requests_for(CHAT)] == [200, None]

    waiting = openai_client(server, max_retries=0, timeout=30.0)
    server.reset()
    server.hold(CHAT, 1)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _catch(errors, lambda: chat(waiting)))
    thread.start()
    deadline = time.monotonic() + 5
    while server.count(CHAT) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.reset()  # the held request is let go: its connection closes without an answer
    thread.join(timeout=5)
    assert not thread.is_alive() and len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)
    assert chat(client).choices[0].message.content  # not held any more


def _catch(errors: list[BaseException], call) -> None:
    try:
        call()
    except BaseException as exc:  # the test inspects it
        errors.append(exc)


def test_openai_401_in_openai_error_format(server: LLMStandInServer) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        chat(openai_client(server, api_key="wrong-key", max_retries=2))

    assert caught.value.status_code == 401
    assert caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    (recorded,) = server.requests  # 401 is not retried
    assert not recorded.authenticated and recorded.status == 401


def test_faults_are_per_route_and_routes_are_validated(server: LLMStandInServer) -> None:
    server.add_faults(MESSAGES_ROUTE, Fault.overloaded())
    assert chat(openai_client(server, max_retries=0)).choices[0].message.content
    assert server.pending_faults(MESSAGES_ROUTE) == 1

    with pytest.raises(ValueError, match="unknown route"):
        server.add_faults("chat.completion", Fault.server_error())
    assert "messages.batches.results" in ROUTES


def test_latency_is_added_and_requests_run_concurrently(server: LLMStandInServer) -> None:
    server.set_latency(0.1)
    client = openai_client(server)
    errors: list = []

    def worker() -> None:
        try:
            chat(client)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert not errors
    assert 0.1 <= elapsed < 0.45  # 5 x 100 ms served in parallel
    assert server.count(CHAT) == 5


# --------------------------------------------------------------------------- #
# OpenAI files + batches
# --------------------------------------------------------------------------- #


def test_openai_batch_submit_poll_download(server: LLMStandInServer) -> None:
    client = openai_client(server)
    prompts = {"a": "first prompt", "b": "second prompt"}
    jsonl = "".join(
        json.dumps(
            {
                "custom_id": custom_id,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "gpt-test", "messages": [{"role": "user", "content": prompt}]},
            }
        )
        + "\n"
        for custom_id, prompt in prompts.items()
    )

    uploaded = client.files.create(file=("requests.jsonl", io.BytesIO(jsonl.encode())), purpose="batch")
    assert (uploaded.purpose, uploaded.filename, uploaded.bytes) == ("batch", "requests.jsonl", len(jsonl))
    assert server.requests_for("files.create")[0].form["file"] == jsonl.encode()  # type: ignore[index]

    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    statuses = [batch.status]
    while batch.status not in ("completed", "failed", "cancelled") and len(statuses) < 10:
        batch = client.batches.retrieve(batch.id)
        statuses.append(batch.status)
    assert statuses == ["validating", "in_progress", "completed"]
    assert batch.request_counts is not None and batch.request_counts.completed == 2
    assert batch.output_file_id and batch.error_file_id is None

    lines = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    by_id = {line["custom_id"]: line for line in lines}
    assert set(by_id) == set(prompts)
    for custom_id, prompt in prompts.items():
        line = by_id[custom_id]
        assert line["error"] is None and line["id"].startswith("batch_req_")
        assert line["response"]["status_code"] == 200
        body = openai.types.chat.ChatCompletion.model_validate(line["response"]["body"])
        expected = default_responder(OPENAI, {"messages": [{"role": "user", "content": prompt}]})
        assert body.choices[0].message.content == expected


def test_openai_batch_cancel(server: LLMStandInServer) -> None:
    client = openai_client(server)
    line = {
        "custom_id": "x",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": MESSAGES},
    }
    uploaded = client.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    assert client.batches.cancel(batch.id).status == "cancelling"
    assert client.batches.retrieve(batch.id).status == "cancelled"

    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_missing")


# --------------------------------------------------------------------------- #
# Anthropic
# --------------------------------------------------------------------------- #


def test_anthropic_message_round_trip(server: LLMStandInServer) -> None:
    reply = message(anthropic_client(server))

    assert reply.type == "message" and reply.role == "assistant" and reply.id.startswith("msg_")
    assert reply.stop_reason == "end_turn"
    assert reply.content[0].type == "text"
    assert reply.content[0].text == default_responder(ANTHROPIC, {"messages": MESSAGES})
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0

    (recorded,) = server.requests
    assert (recorded.path, recorded.route, recorded.api) == ("/v1/messages", MESSAGES_ROUTE, ANTHROPIC)
    assert recorded.headers["anthropic-version"]
    assert "authorization" not in recorded.headers and "x-api-key" not in recorded.headers


def test_anthropic_forced_tool_returns_tool_use_block(server: LLMStandInServer) -> None:
    tool = {
        "name": "classify",
        "description": "Classify the text.",
        "input_schema": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "enum": ["bug", "feature"]},
                "confidence": {"type": "number"},
            },
            "required": ["label", "confidence"],
        },
    }
    reply = anthropic_client(server).messages.create(
        model="claude-test",
        max_tokens=64,
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=[tool],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "classify"},
    )

    assert reply.stop_reason == "tool_use"
    (block,) = reply.content
    assert block.type == "tool_use" and block.name == "classify" and block.id.startswith("toolu_")
    assert block.input["label"] in ("bug", "feature")  # type: ignore[index]
    assert isinstance(block.input["confidence"], float)  # type: ignore[index]


def test_anthropic_529_retried_honouring_retry_after_ms(server: LLMStandInServer) -> None:
    # `retry-after-ms` wins over `retry-after` (which would make this take 5 s).
    server.add_faults(MESSAGES_ROUTE, Fault.overloaded(retry_after=5, retry_after_ms=150))

    assert message(anthropic_client(server, max_retries=1)).content

    first, second = server.requests_for(MESSAGES_ROUTE)
    assert (first.status, second.status) == (529, 200)
    assert 0.15 <= second.received_at - first.received_at < 0.375

    server.add_faults(MESSAGES_ROUTE, Fault.overloaded())
    with pytest.raises(anthropic.OverloadedError) as caught:
        message(anthropic_client(server, max_retries=0))
    assert caught.value.type == "overloaded_error"


def test_anthropic_429_and_401_error_formats(server: LLMStandInServer) -> None:
    server.add_faults(MESSAGES_ROUTE, Fault.rate_limit(retry_after=0.05))
    with pytest.raises(anthropic.RateLimitError) as limited:
        message(anthropic_client(server, max_retries=0))
    assert limited.value.type == "rate_limit_error"
    assert limited.value.request_id and limited.value.request_id.startswith("req_")

    with pytest.raises(anthropic.AuthenticationError) as denied:
        message(anthropic_client(server, api_key="wrong-key"))
    assert denied.value.type == "authentication_error"
    assert denied.value.body["type"] == "error"  # type: ignore[index]
    assert server.requests[-1].status == 401


def test_anthropic_accepts_x_api_key_header(server: LLMStandInServer) -> None:
    # anthropic 2.x sends `Authorization: Bearer`; raw `x-api-key` must work too.
    client = anthropic_client(server, api_key=None, auth_token=None, default_headers={"x-api-key": API_KEY})
    assert message(client).content


def test_anthropic_message_batch_create_poll_results(server: LLMStandInServer) -> None:
    client = anthropic_client(server)
    prompts = {"first": "alpha", "second": "beta"}
    batch = client.messages.batches.create(
        requests=[
            {
                "custom_id": custom_id,
                "params": {
                    "model": "claude-test",
                    "max_tokens": 32,
                    "messages": [{"role": "user", "content": prompt}],
                },
            }
            for custom_id, prompt in prompts.items()
        ]
    )
    statuses = [batch.processing_status]
    while batch.processing_status != "ended" and len(statuses) < 10:
        batch = client.messages.batches.retrieve(batch.id)
        statuses.append(batch.processing_status)

    assert statuses == ["in_progress", "in_progress", "ended"]
    assert batch.request_counts.succeeded == 2 and batch.request_counts.processing == 0
    assert batch.results_url and batch.results_url.endswith(f"/v1/messages/batches/{batch.id}/results")

    results = {entry.custom_id: entry.result for entry in client.messages.batches.results(batch.id)}
    assert set(results) == set(prompts)
    for custom_id, prompt in prompts.items():
        result = results[custom_id]
        assert result.type == "succeeded"
        expected = default_responder(ANTHROPIC, {"messages": [{"role": "user", "content": prompt}]})
        assert result.message.content[0].text == expected  # type: ignore[union-attr]
        assert result.message.usage.service_tier == "batch"  # type: ignore[union-attr]


def test_anthropic_message_batch_cancel(server: LLMStandInServer) -> None:
    client = anthropic_client(server)
    batch = client.messages.batches.create(
        requests=[{"custom_id": "only", "params": {"model": "c", "max_tokens": 8, "messages": MESSAGES}}]  # type: ignore[list-item]
    )
    assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
    (entry,) = list(client.messages.batches.results(batch.id))
    assert entry.result.type == "canceled"


def test_truncated_batch_results_stream_escapes_as_raw_httpx2_error(server: LLMStandInServer) -> None:
    # `messages.batches.results` streams its body after the SDK's retry loop, so a cut-off
    # download is not retried: older anthropic 2.x releases let the bare httpx2 error escape,
    # newer ones (2.17) wrap it in anthropic.APIConnectionError. Either way the batch client
    # sees one connection failure, and a second download reads the whole file.
    server.batch_in_progress_polls = 0
    client = anthropic_client(server, max_retries=2)
    batch = client.messages.batches.create(
        requests=[{"custom_id": "only", "params": {"model": "c", "max_tokens": 8, "messages": MESSAGES}}]  # type: ignore[list-item]
    )
    assert client.messages.batches.retrieve(batch.id).processing_status == "ended"
    server.add_faults("messages.batches.results", Fault.truncated_body())

    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as raised:
        list(client.messages.batches.results(batch.id))
    assert translate_error(raised.value).reason == "llm_connection_error"
    assert server.count("messages.batches.results") == 1
    assert [entry.custom_id for entry in client.messages.batches.results(batch.id)] == ["only"]


# --------------------------------------------------------------------------- #
# Model refusals, outputs cut at the token limit, model listing
# --------------------------------------------------------------------------- #


def test_openai_refusal_and_truncated_output_faults(server: LLMStandInServer) -> None:
    server.add_faults(CHAT, Fault.refusal("No."), Fault.truncated_output(keep=0.25))
    client = openai_client(server, max_retries=0)

    refused = chat(client).choices[0]
    assert (refused.message.content, refused.message.refusal, refused.finish_reason) == (None, "No.", "stop")
    cut = chat(client).choices[0]
    full = default_responder(OPENAI, {"messages": MESSAGES})
    assert cut.finish_reason == "length" and cut.message.content == full[: len(full) // 4]
    assert [r.fault for r in server.requests] == ["refusal", "truncated_output"]
    assert chat(client).choices[0].finish_reason == "stop"


def test_anthropic_refusal_and_max_tokens_faults(server: LLMStandInServer) -> None:
    server.add_faults(MESSAGES_ROUTE, Fault.refusal("I can't."), Fault.truncated_output())
    client = anthropic_client(server, max_retries=0)

    refused = message(client)
    assert refused.stop_reason == "refusal" and refused.content[0].text == "I can't."  # type: ignore[union-attr]
    assert refused.stop_details is not None and refused.stop_details.type == "refusal"
    cut = message(client)
    assert cut.stop_reason == "max_tokens"
    assert len(cut.content[0].text) < len(default_responder(ANTHROPIC, {"messages": MESSAGES}))  # type: ignore[union-attr]


def test_models_are_listed_for_openai_compatible_clients(server: LLMStandInServer) -> None:
    assert [m.id for m in openai_client(server).models.list()] == ["standin-model"]
    assert server.count("models.list") == 1


def test_the_distractor_responder_writes_the_requested_count_in_the_gold_shape() -> None:
    plan = {"messages": [{"role": "user", "content": "Write exactly 5 ... <correct>I need to x</correct>"}]}
    items = json.loads(distractor_responder(OPENAI, plan))["distractors"]
    assert (
        len(items) == 5
        and len({i["text"] for i in items}) == 5
        and all(i["text"].startswith("I need to") for i in items)
    )
    step = {"messages": [{"role": "user", "content": 'exactly 2 <correct>{"planning": "p"}</correct>'}]}
    assert all(
        "execution" in json.loads(i["text"])
        for i in json.loads(distractor_responder(OPENAI, step))["distractors"]
    )
