"""Batch mode through the real SDKs: OpenAI Batch API and Anthropic Message Batches on the stand-in.

Submit, poll, collect; a restart in the middle resumes from the batch ids stored in SQLite and
submits nothing twice; a rerun after collection makes no request at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from generators.llm.store import ResponseStore
from schemas import Problem, Question
from tests.llm_support import API_KEY, generate, make_generator, plan_step
from tests.servers.llm import LLMStandInServer, distractor_responder, last_user_text

SUBMIT = {"openai": "batches.create", "anthropic": "messages.batches.create"}
POLL = {"openai": "batches.retrieve", "anthropic": "messages.batches.retrieve"}
ONLINE = {"openai": "chat.completions.create", "anthropic": "messages.create"}
PRICES = {"gpt-test": {"input": 10.0, "output": 10.0}}


@pytest.fixture
def server() -> Iterator[LLMStandInServer]:
    with LLMStandInServer(
        responder=distractor_responder, openai_api_key=API_KEY, anthropic_api_key=API_KEY
    ) as s:
        yield s


def batch_generator(server, tmp_path, name, **kw):
    kw.setdefault("batch_poll_s", 0.01)
    return make_generator(server, tmp_path, name, batch=True, prices=PRICES, **kw)


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_batch_is_submitted_polled_and_collected_at_the_batch_price(server, tmp_path, name):
    server.batch_in_progress_polls = 2
    gen = batch_generator(server, tmp_path, name)
    out = generate(gen, [plan_step(i) for i in range(5)])
    report = gen.usage_report().model_dump()
    gen.close()
    assert all(isinstance(q, Question) for q in out)
    assert (
        server.count(SUBMIT[name]) == 1 and server.count(POLL[name]) >= 3 and server.count(ONLINE[name]) == 0
    )
    p = out[0].provenance
    assert p.cost_usd == pytest.approx(0.5 * 10.0 * (p.tokens_in + p.tokens_out) / 1e6)
    assert report["total"]["requests"] == 5 and report["spent_usd"] == pytest.approx(
        sum(q.provenance.cost_usd for q in out)
    )


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_restart_resumes_the_stored_batch_instead_of_submitting_again(server, tmp_path, name):
    steps = [plan_step(i) for i in range(4)]
    server.batch_in_progress_polls = 10_000
    first = batch_generator(server, tmp_path, name, batch_max_wait_s=0.05)
    pending = generate(first, steps)
    first.close()  # the "process" ends with the batch still running
    assert {p.reason for p in pending if isinstance(p, Problem)} == {"batch_pending"} and len(pending) == 4
    assert "a later run collects it" in pending[0].detail
    (batch,) = ResponseStore(tmp_path / "out" / "llm_cache.sqlite").pending_batches(first.provider)
    assert len(batch.entries) == 4 and server.count(SUBMIT[name]) == 1

    server.batch_in_progress_polls = 0  # the provider finishes
    second = batch_generator(server, tmp_path, name)
    done = generate(second, steps)
    second.close()
    assert all(isinstance(q, Question) for q in done)
    assert server.count(SUBMIT[name]) == 1  # collected, not resubmitted

    polls = server.count(POLL[name])
    third = batch_generator(server, tmp_path, name)
    assert generate(third, steps) == done
    third.close()
    assert server.count(SUBMIT[name]) == 1 and server.count(POLL[name]) == polls  # all from the cache


def test_invalid_batch_output_is_resubmitted_once_with_the_reason(server, tmp_path):
    def first_bad(api, body):
        if "could not be used" in last_user_text(api, body):
            return distractor_responder(api, body)
        return json.dumps({"answer": "B"})

    server.responder = first_bad
    server.batch_in_progress_polls = 0
    gen = batch_generator(server, tmp_path, "openai")
    out = generate(gen, [plan_step(1), plan_step(2)])
    report = gen.usage_report().model_dump()
    gen.close()
    assert all(isinstance(q, Question) for q in out)
    assert server.count("batches.create") == 2 and report["total"]["retries"] == 2


def test_the_budget_holds_back_batch_requests_that_do_not_fit(server, tmp_path):
    server.batch_in_progress_polls = 0
    gen = batch_generator(server, tmp_path, "openai", budget_usd=0.03)
    out = generate(gen, [plan_step(i) for i in range(6)])
    report = gen.usage_report().model_dump()
    gen.close()
    made = [o for o in out if isinstance(o, Question)]
    held = [o for o in out if isinstance(o, Problem)]
    assert made and held and {p.reason for p in held} == {"no_distractors"}
    lines = server.requests_for("files.create")[0].form["file"].decode().splitlines()  # type: ignore[index]
    assert len(lines) == len(made) and report["spent_usd"] <= 0.03
