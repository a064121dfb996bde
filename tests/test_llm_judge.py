"""The LLM answer judge: pure prompt and parser, and builds against the stand-in LLM server.

A WebDancer-style sample with verbose answers: the rules decide some runs and leave the rest
`needs_judge`; the stand-in is scripted to answer as the gold would. With the judge on, every run it
accepts is kept, rule-decided runs are never sent, the spend is in the report's ledger section and a
rerun makes no request; with it off, the `needs_judge` runs are counted in `report.json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extractors.labels.answers import judge_answer
from flows.cli import app
from generators.llm.judge import format_prompt, needs_judge, parse_verdict, request_body
from generators.llm.prompting import LLM_PROMPTS, PromptLibrary
from schemas import Outcome, Source, Trajectory
from tests.servers.llm import LLMStandInServer, last_user_text

KEY = "sk-aptforge-JUDGE-77aa"
CHAT = "chat.completions.create"

#: (question, gold aliases, final answer, what the gold says of it)
RUNS = [
    ("Which river joins the Danube and the Inn at Passau?", ["Ilz", "Ilz River"], "The Ilz river.", True),
    ("Who wrote Faust?", ["Goethe"], "Faust was written by Goethe.", True),
    ("Who wrote Faust, part two?", ["Goethe"], "Schiller wrote it.", False),
    ("How many moons does Mars have?", ["2", "two"], "7", False),
    ("How high is the Zugspitze?", ["2962 m", "2962"], "Around 2,962 meters high, per the DAV.", True),
    (
        "Who painted the Night Watch?",
        ["Rembrandt"],
        "Most likely Rembrandt, but I could not confirm it.",
        True,
    ),
    ("Which city hosts the Wimbledon?", ["London"], "It is in London or perhaps Wimbledon town.", True),
    ("Who discovered penicillin?", ["Alexander Fleming"], "It was written up by Florey around 1940.", False),
    ("What is the capital of Australia?", ["Canberra"], "Sydney is the capital, or maybe Canberra.", False),
    ("When did Apollo 11 land?", ["1969"], "In July 1969 the crew, not 1968, landed.", True),
]


def _row(question: str, aliases: list[str], answer: str) -> dict[str, Any]:
    return {
        "type": "chatml",
        "task": "agent/multiturn_search",
        "tag": "e2hqa",
        "messages": [
            {"role": "system", "content": "You are a Web Information Seeking Master."},
            {"role": "user", "content": f"# Tools\n<tools>{{}}</tools>\n\nUser: {question}"},
            {
                "role": "assistant",
                "content": '<think>Search it.</think>\n<tool_call>\n{"name": "search", "arguments": '
                f'{{"query": [{json.dumps(question)}]}}}}\n</tool_call>',
            },
            {
                "role": "user",
                "content": f"<tool_response>\nA Google search found: {aliases[0]} ...\n</tool_response>",
            },
            {"role": "assistant", "content": f"<think>Found it.</think>\n<answer>{answer}</answer>"},
        ],
        "answer": [aliases],
    }


def _truth() -> dict[str, bool]:
    return {answer: right for _, _, answer, right in RUNS}


def scripted_judge(api: str, body: dict[str, Any]) -> str:
    """The stand-in's reply: the gold's own word on the candidate (unsure for an unknown one)."""
    text = last_user_text(api, body)
    m = re.search(r"<candidate>(.*?)</candidate>", text, re.S)
    right = _truth().get(m.group(1).strip()) if m else None
    verdict = "unsure" if right is None else "correct" if right else "incorrect"
    return json.dumps({"verdict": verdict, "reason": f"scripted: {verdict}"})


@pytest.fixture
def server() -> Iterator[LLMStandInServer]:
    with LLMStandInServer(responder=scripted_judge, openai_api_key=KEY) as s:
        yield s


def _traj(question: str, aliases: list[str], answer: str) -> Trajectory:
    return Trajectory(
        trajectory_id=question,
        kind="dr",
        task=question,
        prompt=question,
        outcome=judge_answer(answer, aliases).outcome(),
        source=Source(format="webdancer", file="runs.jsonl"),
        final_answer=answer,
        gold_answer=aliases[0],
        meta={"gold_aliases": aliases},
    )


def test_the_judge_prompt_holds_question_aliases_and_answer_and_only_needs_judge_runs_qualify():
    template = PromptLibrary.load([LLM_PROMPTS]).get("judge", "answer")
    assert template is not None and template.name == "judge.answer.v1.md.j2"
    t = _traj("Who wrote Faust?", ["Goethe", "J. W. von Goethe"], "Most likely Goethe, not sure.")
    prompt = format_prompt(template, t)
    assert "Who wrote Faust?" in prompt.user and "- J. W. von Goethe" in prompt.user
    assert "<candidate>Most likely Goethe, not sure.</candidate>" in prompt.user
    assert needs_judge(t) and not needs_judge(_traj("Who wrote Faust?", ["Goethe"], "Goethe"))
    body = request_body("openai", prompt, "m", 64)
    assert body["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == [
        "correct",
        "incorrect",
        "unsure",
    ]
    assert request_body("anthropic", prompt, "m", 64)["tool_choice"] == {
        "type": "tool",
        "name": "record_verdict",
    }


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"verdict": "correct", "reason": "names Goethe"}', "correct"),
        ('```json\n{"verdict": "incorrect", "reason": "x"}\n```', "incorrect"),
        ('Sure. {"verdict": "unsure", "reason": "cannot tell"}', "unsure"),
        ('{"verdict": "maybe", "reason": "x"}', None),
        ("no json here", None),
        (None, None),
        ("", None),
    ],
)
def test_verdicts_parse_from_clean_noisy_and_garbage_replies(text, verdict):
    got = parse_verdict(text)
    assert (got.verdict if got else None) == verdict


def _write_sample(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sample_traj.jsonl").write_text(
        "".join(json.dumps(_row(q, a, ans)) + "\n" for q, a, ans, _ in RUNS)
    )


def _config(tmp_path: Path, judge: bool, description: str = "judge test") -> Path:
    cfg = tmp_path / f"dr-judge-{judge}.yaml"
    lines = [
        "scenario: dr",
        "version: vjudge",
        f"description: {description}",
        f"sources: [{tmp_path / 'runs'}]",
        "tasks:",
        "  summ_ans: {max_items_per_trajectory: 1}",
        f"out_dir: {tmp_path / ('on' if judge else 'off')}",
        "seed: 1",
    ]
    if judge:
        lines += ["judge: {generator: openai, model: judge-standin}"]
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def _build(config: Path, env: dict[str, str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["build", str(config)], env=env)
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    out = next(Path(config.read_text().split("out_dir: ")[1].split("\n")[0]).rglob("report.json"))
    return json.loads(out.read_text())


def _rules() -> dict[str, str]:
    return {answer: judge_answer(answer, aliases).label for _, aliases, answer, _ in RUNS}


@pytest.mark.flow
def test_with_the_judge_every_run_it_accepts_is_kept_rule_decided_runs_are_never_sent_and_reruns_are_free(
    prefect_harness, server, tmp_path
):
    _write_sample(tmp_path / "runs")
    rules = _rules()
    undecided = [a for a, label in rules.items() if label == "unknown"]
    accepted = [a for a, right in _truth().items() if right]
    assert len(undecided) >= 4 and set(undecided) & set(accepted)
    env = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": KEY}

    report = _build(_config(tmp_path, judge=True), env)
    sent = server.requests_for(CHAT)
    assert len(sent) == len(undecided) == report["judge"]["counts"]["sent"]
    asked = {
        re.search(r"<candidate>(.*?)</candidate>", last_user_text("openai", r.json), re.S).group(1)
        for r in sent
    }
    assert asked == set(undecided)  # rule-decided runs are never sent
    expect_kept = [a for a in accepted if rules[a] == "success" or a in undecided]
    assert report["counts"]["kept"] == len(expect_kept) and report["counts"]["needs_judge"] == 0
    assert report["labels"].get("unknown", 0) == 0
    usage = report["judge"]["llm"]["by_task"]["judge"]["judge-standin"]
    assert usage["requests"] == len(undecided) and usage["tokens_in"] > 0

    again = _build(_config(tmp_path, judge=True, description="changed so every stage runs again"), env)
    assert server.count(CHAT) == len(undecided)  # the rerun makes no request
    assert again["judge"]["llm"]["total"]["requests"] == 0 and again["counts"]["kept"] == len(expect_kept)


@pytest.mark.flow
def test_without_the_judge_the_needs_judge_runs_are_counted_in_the_report(prefect_harness, tmp_path):
    _write_sample(tmp_path / "runs")
    undecided = [a for a, label in _rules().items() if label == "unknown"]
    report = _build(_config(tmp_path, judge=False), {})
    assert report["judge"]["enabled"] is False and report["judge"]["counts"] == {}
    assert report["counts"]["needs_judge"] == len(undecided) == report["dropped_by_reason"]["needs_judge"]


def test_the_judge_agrees_with_the_rules_on_the_runs_the_rules_decide(server, tmp_path):
    from flows.config import BuildConfig
    from flows.settings import Settings, make_llm_judge

    decided = [
        _traj(q, a, ans) for q, a, ans, _ in RUNS if judge_answer(ans, a).label in ("success", "failure")
    ]
    config = BuildConfig.model_validate(
        {
            "scenario": "dr",
            "version": "v1",
            "sources": [{"path": str(tmp_path)}],
            "tasks": {"summ_ans": {}},
            "out_dir": str(tmp_path),
            "judge": {"generator": "openai", "model": "judge-standin", "base_url": server.openai_base_url},
        }
    )
    judge = make_llm_judge(config, Settings(OPENAI_API_KEY=KEY))
    try:
        outcomes = judge.ask(decided)
    finally:
        judge.close()
    agree = sum(
        (o.value.verdict == "correct") == (t.outcome.label == "success")
        for t, o in zip(decided, outcomes, strict=True)
    )
    assert len(decided) >= 4 and agree / len(decided) >= 0.9
    assert not [t for t in decided if needs_judge(t)]  # these are exactly the runs `judge()` never sends
    assert isinstance(decided[0].outcome, Outcome)
