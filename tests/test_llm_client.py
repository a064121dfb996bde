"""The LLM layer through the real openai/anthropic SDKs against the stand-in server on 127.0.0.1.

Retries, faults, cache hits and budget stops are asserted by counting requests at the server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from generators.llm.clients import OpenAIChat
from generators.llm.engine import Limiter, LLMEngine
from generators.llm.ledger import Ledger
from generators.llm.openai_gen import OpenAIGenerator
from generators.llm.prompting import PromptLibrary
from generators.llm.store import ResponseStore
from schemas import Problem, Question
from tests.llm_support import (
    API_KEY,
    CHAT,
    MESSAGES,
    SCENARIO_PROMPTS,
    dr_step,
    generate,
    make_generator,
    plan_step,
)
from tests.servers.llm import Fault, LLMStandInServer, distractor_responder, last_user_text


@pytest.fixture
def server() -> Iterator[LLMStandInServer]:
    with LLMStandInServer(
        responder=distractor_responder, openai_api_key=API_KEY, anthropic_api_key=API_KEY
    ) as s:
        yield s


def reasons(out: list) -> list[str | None]:
    return [o.reason if isinstance(o, Problem) else None for o in out]


def test_llm_distractors_carry_model_prompt_hash_tokens_and_cost(server, tmp_path):
    gen = make_generator(server, tmp_path, prices={"gpt-test": {"input": 2.0, "output": 8.0}})
    (q,) = generate(gen, [plan_step(1)])
    gen.close()
    assert isinstance(q, Question) and q.options[0] == q.gold and len(q.options) == 4
    assert all(d.origin.startswith("llm:gpt-test:") for d in q.distractors)
    p = q.provenance
    assert (p.generator, p.model) == ("openai", "gpt-test") and len(p.prompt_hash) == 64
    assert p.tokens_in > 0 and p.tokens_out > 0
    assert p.cost_usd == pytest.approx((p.tokens_in * 2.0 + p.tokens_out * 8.0) / 1e6)
    body = server.requests_for(CHAT)[0].json
    assert body["response_format"]["json_schema"]["strict"] is True and body["model"] == "gpt-test"


def test_429_and_500_are_retried_by_the_sdk_honouring_retry_after(server, tmp_path):
    server.add_faults(CHAT, Fault.rate_limit(retry_after=0.05), Fault.server_error(retry_after=0.05))
    gen = make_generator(server, tmp_path, max_retries=2)
    out = generate(gen, [plan_step(1)])
    report = gen.usage_report().model_dump()
    gen.close()
    assert reasons(out) == [None]
    assert [r.status for r in server.requests_for(CHAT)] == [429, 500, 200]
    assert [r.headers["x-stainless-retry-count"] for r in server.requests_for(CHAT)] == ["0", "1", "2"]
    assert report["total"]["requests"] == 1 and report["total"]["retries"] == 0


def test_sdk_retries_give_up_into_a_problem(server, tmp_path):
    server.add_faults(
        CHAT, *[Fault.rate_limit(retry_after=0.01)] * 2, *[Fault.server_error(retry_after=0.01)] * 2
    )
    gen = make_generator(server, tmp_path, max_retries=1, max_concurrency=1)
    out = generate(gen, [plan_step(1), plan_step(2)])
    gen.close()
    assert reasons(out) == ["llm_rate_limited", "llm_error"]
    assert "HTTP 500" in out[1].detail and server.count(CHAT) == 4


def test_a_malformed_json_body_gets_one_retry_then_becomes_a_problem(server, tmp_path):
    server.add_faults(CHAT, Fault.malformed_json())
    gen = make_generator(server, tmp_path, max_retries=3)
    assert reasons(generate(gen, [plan_step(1)])) == [None]
    assert server.count(CHAT) == 2  # the SDK does not retry it; our one tenacity retry does

    server.add_faults(CHAT, Fault.malformed_json(), Fault.malformed_json())
    out = generate(gen, [plan_step(2)])
    gen.close()
    assert reasons(out) == ["llm_malformed_response"] and server.count(CHAT) == 4
    assert gen.usage_report().total.retries == 2


def test_a_reply_cut_at_the_token_limit_is_retried_once_with_twice_the_limit(server, tmp_path):
    server.add_faults(CHAT, Fault.truncated_output())
    gen = make_generator(server, tmp_path, max_output_tokens=300)
    assert reasons(generate(gen, [plan_step(1)])) == [None]
    first, second = server.requests_for(CHAT)
    assert (first.json["max_completion_tokens"], second.json["max_completion_tokens"]) == (300, 600)

    server.add_faults(CHAT, Fault.truncated_output(), Fault.truncated_output())
    out = generate(gen, [plan_step(2)])
    gen.close()
    assert reasons(out) == ["llm_truncated_output"] and server.count(CHAT) == 4


@pytest.mark.parametrize(("name", "route"), [("openai", CHAT), ("anthropic", MESSAGES)])
def test_a_refusal_is_a_problem_not_retried_and_not_paid_twice(server, tmp_path, name, route):
    server.add_faults(route, Fault.refusal("I can't help with that."))
    gen = make_generator(server, tmp_path, name)
    out = generate(gen, [plan_step(1)])
    gen.close()
    assert reasons(out) == ["llm_refused"] and "I can't help with that." in out[0].detail
    assert server.count(route) == 1 and gen.usage_report().total.refusals == 1
    again = make_generator(server, tmp_path, name)
    assert reasons(generate(again, [plan_step(1)])) == ["llm_refused"]
    again.close()
    assert server.count(route) == 1


def test_a_timeout_becomes_a_problem_after_the_sdk_retry(server, tmp_path):
    server.add_faults(CHAT, Fault.timeout(), Fault.timeout())
    gen = make_generator(server, tmp_path, timeout_s=0.3, max_retries=1)
    started = time.monotonic()
    out = generate(gen, [plan_step(1)])
    gen.close()
    assert reasons(out) == ["llm_timeout"] and server.count(CHAT) == 2
    assert time.monotonic() - started < 3


def test_near_copies_of_the_gold_are_retried_with_the_reason_then_become_a_problem(server, tmp_path):
    step = plan_step(1)
    server.responder = lambda api, body: json.dumps({"distractors": [{"kind": "x", "text": step.gold}] * 3})
    gen = make_generator(server, tmp_path)
    out = generate(gen, [step])
    gen.close()
    assert reasons(out) == ["llm_invalid_output"] and "near-copy of the correct answer" in out[0].detail
    first, second = server.requests_for(CHAT)
    assert "could not be used" not in last_user_text("openai", first.json)
    assert "near-copy of the correct answer" in last_user_text("openai", second.json)


def test_a_rerun_is_served_from_the_cache_with_zero_requests(server, tmp_path):
    steps = [plan_step(i) for i in range(8)]
    gen = make_generator(server, tmp_path, prices={"gpt-test": {"input": 1.0, "output": 1.0}})
    first = generate(gen, steps)
    gen.close()
    assert server.count(CHAT) == 8 and reasons(first) == [None] * 8
    again = make_generator(server, tmp_path, prices={"gpt-test": {"input": 1.0, "output": 1.0}})
    second = generate(again, steps)
    report = again.usage_report().model_dump()
    again.close()
    assert server.count(CHAT) == 8
    assert second == first  # same options, same provenance (original tokens and cost)
    assert (
        report["total"]["cache_hits"] == 8 and report["total"]["requests"] == 0 and report["spent_usd"] == 0
    )
    assert ResponseStore(tmp_path / "out" / "llm_cache.sqlite").count() == 8


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_budget_cap_stops_cleanly_leaving_no_distractors_problems(server, tmp_path, concurrency):
    prices = {"gpt-test": {"input": 100.0, "output": 100.0}}
    gen = make_generator(server, tmp_path, prices=prices, budget_usd=0.6, max_concurrency=concurrency)
    steps = [plan_step(i) for i in range(12)]
    out = generate(gen, steps)
    report = gen.usage_report().model_dump()
    gen.close()
    made = [o for o in out if isinstance(o, Question)]
    stopped = [o for o in out if isinstance(o, Problem)]
    assert made and stopped and len(made) + len(stopped) == 12
    assert {p.reason for p in stopped} == {"no_distractors"} and "budget of $0.6 reached" in stopped[0].detail
    assert server.count(CHAT) == len(made)  # nothing is sent once the budget is exhausted
    spent = sum(q.provenance.cost_usd for q in made)
    assert report["spent_usd"] == pytest.approx(spent, abs=1e-6) and spent <= 0.6
    assert report["spent_usd"] == pytest.approx(
        sum(100 * (q.provenance.tokens_in + q.provenance.tokens_out) for q in made) / 1e6, abs=1e-6
    )
    assert report["budget_exhausted"] and report["total"]["no_distractors"] == len(stopped)


def test_a_budget_without_a_price_is_refused_up_front(server, tmp_path):
    with pytest.raises(ValueError, match="no price"):
        make_generator(server, tmp_path, budget_usd=1.0)


def test_a_bad_api_key_stops_the_engine_after_one_request_and_is_never_echoed(server, tmp_path):
    bad = "sk-wrong-key-123456"
    server.add_faults(CHAT)  # no fault: the 401 comes from authentication
    gen = make_generator(server, tmp_path, key=bad, max_concurrency=1)
    out = generate(gen, [plan_step(i) for i in range(5)])
    gen.close()
    assert set(reasons(out)) == {"llm_unavailable"} and server.count(CHAT) == 1
    assert "HTTP 401" in out[0].detail and all(bad not in p.detail for p in out)


def test_requests_in_flight_never_exceed_max_concurrency_across_shard_threads(server, tmp_path):
    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def slow(api, body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return distractor_responder(api, body)

    server.responder = slow
    gen = make_generator(server, tmp_path, max_concurrency=3)
    shards = [[plan_step(10 * s + i) for i in range(5)] for s in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda shard: generate(gen, shard), shards))
    gen.close()
    assert all(reasons(r) == [None] * 5 for r in results)
    assert state["max"] == 3 and server.count(CHAT) == 20


def test_the_requests_per_minute_limit_spaces_requests(server, tmp_path):
    store = ResponseStore(tmp_path / "cache.sqlite")
    client = OpenAIChat(openai.AsyncOpenAI(api_key=API_KEY, base_url=server.openai_base_url))
    engine = LLMEngine(client, store, Ledger({}), Limiter(8, rpm=2, period=0.5))
    gen = OpenAIGenerator(
        runner=engine, ledger=engine.ledger, prompts=PromptLibrary.load(SCENARIO_PROMPTS), model="gpt-test"
    )
    started = time.monotonic()
    assert reasons(generate(gen, [plan_step(i) for i in range(6)])) == [None] * 6
    elapsed = time.monotonic() - started
    engine.close()
    arrivals = [r.received_at for r in server.requests_for(CHAT)]
    assert elapsed >= 0.9 and arrivals[-1] - arrivals[0] >= 0.9  # 2 at once, then 4 per second


class _WatchedGenerator(OpenAIGenerator):
    """Records, as each later prompt is built, how many requests the server had received by then."""

    server: LLMStandInServer
    seen: list[int]

    def build_prompt(self, step, n, attempt=1, failure=None):
        if attempt == 1 and step.step_index > 1:
            deadline = time.monotonic() + 10  # the first request gets out while this thread waits
            while not self.server.count(CHAT) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.seen.append(self.server.count(CHAT))
        return super().build_prompt(step, n, attempt, failure)


def test_a_shards_first_request_is_in_flight_before_its_later_prompts_are_built(server, tmp_path):
    store = ResponseStore(tmp_path / "cache.sqlite")
    client = OpenAIChat(openai.AsyncOpenAI(api_key=API_KEY, base_url=server.openai_base_url))
    engine = LLMEngine(client, store, Ledger({}), Limiter(4))
    gen = _WatchedGenerator(
        runner=engine, ledger=engine.ledger, prompts=PromptLibrary.load(SCENARIO_PROMPTS), model="gpt-test"
    )
    gen.server, gen.seen = server, []
    steps = [plan_step(i).model_copy(update={"step_index": i + 1}) for i in range(3)]
    out = generate(gen, steps)
    engine.close()
    assert reasons(out) == [None] * 3
    assert len(gen.seen) == 2 and gen.seen[0] >= 1  # not a barrier: the engine took the first job at once


@pytest.mark.parametrize(("structured", "key"), [("auto", "tool_choice"), ("json_schema", "output_config")])
def test_anthropic_generates_with_a_forced_tool_or_native_structured_output(
    server, tmp_path, structured, key
):
    server.add_faults(MESSAGES, Fault.overloaded(retry_after_ms=20))
    gen = make_generator(server, tmp_path, "anthropic", model="claude-test", structured_output=structured)
    (q,) = generate(gen, [plan_step(1)])
    gen.close()
    assert isinstance(q, Question) and q.provenance.model == "claude-test"
    assert all(d.origin.startswith("llm:claude-test:") for d in q.distractors)
    assert [r.status for r in server.requests_for(MESSAGES)] == [529, 200]
    assert key in server.requests_for(MESSAGES)[-1].json


def test_openai_compatible_uses_the_servers_model_and_max_tokens(server, tmp_path):
    gen = make_generator(server, tmp_path, "openai-compatible", model=None)
    (q,) = generate(gen, [plan_step(1)])
    gen.close()
    assert q.provenance.model == "standin-model" and server.count("models.list") == 1
    assert server.requests_for(CHAT)[0].json["max_tokens"] == 1024


def test_deep_research_steps_get_json_step_distractors_from_the_dr_prompt(server, tmp_path):
    gen = make_generator(server, tmp_path)
    (q,) = generate(gen, [dr_step(1)], n_options=6)
    gen.close()
    assert isinstance(q, Question) and len(q.options) == 6
    assert all(set(json.loads(d.text)) == {"planning", "execution"} for d in q.distractors)
    assert "premature_complete" in last_user_text("openai", server.requests_for(CHAT)[0].json)


def test_missing_keys_and_endpoints_are_refused_naming_the_variable(server, tmp_path):
    from flows.settings import Settings, make_llm_generator
    from tests.llm_support import build_config

    bare = Settings(
        OPENAI_API_KEY=None, ANTHROPIC_API_KEY=None, OPENAI_BASE_URL=None, ANTHROPIC_BASE_URL=None
    )
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        make_llm_generator(build_config(tmp_path, "openai"), bare)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        make_llm_generator(build_config(tmp_path, "anthropic"), bare)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        make_llm_generator(build_config(tmp_path, "openai-compatible"), bare)
    server.openai_api_key = None  # like vLLM or Ollama: any key is accepted
    keyless = make_llm_generator(
        build_config(tmp_path, "openai-compatible", base_url=server.openai_base_url), bare
    )
    (q,) = generate(keyless, [plan_step(1)])
    keyless.close()
    assert isinstance(q, Question) and server.requests_for(CHAT)[0].authenticated


def test_invalid_output_is_not_cached_as_final_and_a_rerun_retries_it(server, tmp_path):
    step = plan_step(1)
    server.responder = lambda api, body: json.dumps({"distractors": [{"kind": "x", "text": step.gold}] * 3})
    gen = make_generator(server, tmp_path)
    assert reasons(generate(gen, [step])) == ["llm_invalid_output"]
    gen.close()
    assert server.count(CHAT) == 2  # the first attempt and its one retry, both invalid
    assert ResponseStore(tmp_path / "out" / "llm_cache.sqlite").count() == 0
    server.responder = distractor_responder
    again = make_generator(server, tmp_path)
    assert reasons(generate(again, [step])) == [None]  # asked again, not served the invalid reply
    again.close()
    assert server.count(CHAT) == 3


def test_the_budget_counts_money_in_flight_and_is_mostly_spent_before_refusing(server, tmp_path):
    """16 requests in flight each reserve their worst case; refusing only when spent plus what is in
    flight passes the budget (after waiting for it) spends most of `budget_usd: 0.02`."""
    prices = {"gpt-test": {"input": 0.4, "output": 1.6}}
    gen = make_generator(server, tmp_path, prices=prices, budget_usd=0.02, max_concurrency=16)
    out = generate(gen, [plan_step(i) for i in range(150)])
    report = gen.usage_report().model_dump()
    gen.close()
    refused = [o for o in out if isinstance(o, Problem)]
    assert refused and {p.reason for p in refused} == {"no_distractors"}
    assert 0.8 * 0.02 <= report["spent_usd"] <= 0.02, report["spent_usd"]
    assert server.count(CHAT) == len(out) - len(refused)
