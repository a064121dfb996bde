"""Helpers for the LLM tests: gold steps, and generators wired by the real flow code to the stand-in server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from extractors.discovery import discover_extractors, prompt_dirs
from flows.config import BuildConfig
from flows.settings import Settings, make_llm_generator
from generators.llm.generator import LLMDistractorGenerator
from schemas import GoldStep, Problem, Provenance, Question, content_id
from tests.servers.llm import LLMStandInServer

API_KEY = "sk-aptforge-test-7f3c9e"
CHAT = "chat.completions.create"
MESSAGES = "messages.create"

_PLANS = [
    "I need to look at how the `-` operator is defined in ops.py",
    "I need to change the subtraction entry to use operator.sub",
    "I need to write a script that reproduces the wrong result",
    "I need to run the reproduction script to confirm the fix",
    "I need to open the slug module to find the truncation code",
    "I need to add a max_length check before joining the words",
]


def run_messages(i: int) -> list[dict[str, Any]]:
    """A short SWE run in APTBench plan form (system, issue, plans and observations)."""
    return [
        {"role": "system", "content": "You are a helpful assistant that can work in a terminal."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": f'<pr_description>\nIssue {i}: `evaluate("5 - 2")` '
                    "returns 7 instead of 3.\n</pr_description>",
                }
            ],
        },
        {"role": "assistant", "plan": "I need to find where the operators are defined"},
        {"role": "tool", "content": [{"type": "text", "text": f"OBSERVATION:\ntinycalc/ops.py line {i}"}]},
    ]


def plan_step(i: int, gold: str | None = None, **fields: Any) -> GoldStep:
    """A `swe_issue_fix/plan` gold step with a small context."""
    return GoldStep(
        step_id=content_id("step", i),
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id=content_id("traj", i),
        step_index=3,
        gold=gold or f"{_PLANS[i % len(_PLANS)]} (case {i})",
        fields={"trajs": json.dumps(run_messages(i)), **fields},
        provenance=Provenance(
            source_file=f"run{i}.traj", source_format="swe_agent_traj", extractor="swe_issue_fix"
        ),
    )


def dr_step(i: int) -> GoldStep:
    """A deep-research plan gold step whose gold is a JSON step."""
    gold = json.dumps(
        {
            "planning": f"Search for the founding year of company {i}.",
            "execution": {"name": "web_search", "args": {"text": f"company {i} founded"}},
        }
    )
    trajectory = [
        {
            "planning": "Look for the company.",
            "execution": {"name": "web_search", "args": {"text": "x"}},
            "observation": "title: ...\nbody: ...\nurl: https://example.com",
        }
    ]
    return GoldStep(
        step_id=content_id("dr", i),
        scenario="dr",
        task="plan",
        form="mcq",
        trajectory_id=content_id("drt", i),
        step_index=1,
        gold=gold,
        fields={
            "query": f"When was company {i} founded?",
            "trajectory": json.dumps(trajectory),
            "tool_set": "web_search",
        },
        provenance=Provenance(source_file=f"dr{i}.jsonl", source_format="webdancer", extractor="dr"),
    )


def build_config(tmp_path: Path, name: str = "openai", **generator: Any) -> BuildConfig:
    """A minimal build config whose generator is an LLM one (model `gpt-test` unless given)."""
    generator.setdefault("model", "gpt-test")
    generator.setdefault("timeout_s", 5.0)
    generator.setdefault("max_retries", 2)
    return BuildConfig(
        scenario="swe_issue_fix",
        version="vtest",
        sources=[{"path": str(tmp_path)}],
        tasks={"plan": {}},
        out_dir=str(tmp_path / "out"),
        generator={"name": name, **generator},
    )


def settings_for(server: LLMStandInServer, key: str = API_KEY) -> Settings:
    """Settings as the environment would give them, pointing both providers at the stand-in."""
    return Settings(
        OPENAI_API_KEY=key,
        OPENAI_BASE_URL=server.openai_base_url,
        ANTHROPIC_API_KEY=key,
        ANTHROPIC_BASE_URL=server.anthropic_base_url,
    )


def make_generator(
    server: LLMStandInServer, tmp_path: Path, name: str = "openai", key: str = API_KEY, **generator: Any
) -> LLMDistractorGenerator:
    """An LLM generator built by `flows.settings.make_llm_generator` against the stand-in."""
    return make_llm_generator(build_config(tmp_path, name, **generator), settings_for(server, key))


def generate(
    gen: LLMDistractorGenerator, steps: list[GoldStep], n_options: int = 4
) -> list[Question | Problem]:
    """Every output of one `generate()` call."""
    return list(gen.generate(steps, [], n_options))


SCENARIO_PROMPTS = prompt_dirs(discover_extractors())
"""The scenarios' prompt folders, as the flows hand them to `PromptLibrary.load`."""
