"""The extract and generate stages keep a bounded window of shards submitted and not yet gathered.

With every shard submitted at once, the workers ran ahead of the flow and finished shards' gold steps
and questions piled up in memory. The shard tasks run here as plain functions, the moment they are
submitted (the worst case: every submitted shard is finished and waits for the flow); a recorder
counts the shards submitted and not yet gathered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prefect.utilities.annotations import quote

from flows import build_stages, work
from flows.build_report import Timer
from flows.config import load_config

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class _Window:
    open: int = 0
    widest: int = 0
    submitted: dict[str, int] = field(default_factory=dict)

    def task(self, t: Any) -> Any:
        return _Submitter(t.fn, t.name, self)


@dataclass
class _Done:
    value: Any
    window: _Window

    def result(self) -> Any:
        self.window.open -= 1
        return self.value


@dataclass
class _Submitter:
    fn: Any
    name: str
    window: _Window

    def submit(self, *args: Any) -> _Done:
        value = self.fn(*(a.unquote() if isinstance(a, quote) else a for a in args))
        self.window.open += 1
        self.window.widest = max(self.window.widest, self.window.open)
        self.window.submitted[self.name] = self.window.submitted.get(self.name, 0) + 1
        return _Done(value, self.window)


def _extracted(tmp_path: Path, monkeypatch: Any, workers: int) -> tuple[Any, ...]:
    """The bundled runs read, kept and extracted, one run a shard, the shard tasks run by a recorder."""
    config = load_config(ROOT / "configs" / "swe_issue_fix.yaml")
    config = config.model_copy(
        update={
            "out_dir": str(tmp_path),
            "limits": config.limits.model_copy(
                update={"shard_size": 4, "max_workers": workers, "cache": False}
            ),
        }
    )
    window = _Window()
    monkeypatch.setattr(build_stages, "_cached", lambda t, _config: window.task(t))
    scenario = build_stages.resolve_scenario(config)
    inputs = build_stages.plan_inputs(config, scenario)
    reads = [build_stages.read_shard.fn(shard, config.privacy) for shard in inputs.shards]
    options = {
        n: build_stages.extract_options(t, scenario.specs[n], config.seed) for n, t in scenario.tasks.items()
    }
    kept = build_stages.keep_task.fn(config, reads, options, work.spill_area())
    timer = Timer()
    golds, _ = build_stages.extract_golds(config, scenario, kept, timer)
    return config, scenario, kept, golds, window, timer


@pytest.mark.parametrize("workers", [1, 3])
def test_extract_and_generate_keep_twice_the_workers_shards_in_flight(tmp_path, monkeypatch, workers):
    config, scenario, kept, golds, window, timer = _extracted(tmp_path, monkeypatch, workers)
    runs = kept.counts.kept
    assert len(kept.shards) == runs  # the keep task spilled one shard of runs per extract shard
    assert runs > 2 * workers  # one run a shard: more shards than the window
    assert window.submitted["extract-shard"] == runs and golds.total > 0
    assert window.widest == 2 * workers and window.open == 0
    window.widest = 0
    posed = build_stages.generate_questions(config, scenario, golds, timer)
    assert window.submitted["generate-shard"] > 2 * workers
    assert window.widest == 2 * workers and window.open == 0
    assert sum(len(s.refs) for s in posed.questions) == window.submitted["generate-shard"]


def test_only_an_mcq_task_spills_a_distractor_pool(tmp_path, monkeypatch):
    """A completion task's steps take no distractors: no pool is written for it, nor loaded where its
    shards run (at 100,000 small rows the action task's pool was the generate stage's peak)."""
    config, scenario, _, golds, _, timer = _extracted(tmp_path, monkeypatch, 1)
    assert {n: s.form for n, s in scenario.specs.items()} == {"plan": "mcq", "action": "completion"}
    assert golds.counts["plan"] > 0 and golds.counts["action"] > 0
    assert len(list(golds.pool("plan"))) == golds.counts["plan"] and golds.pools["plan"].exists()
    assert not golds.pools["action"].exists() and list(golds.pool("action")) == []
    posed = build_stages.generate_questions(config, scenario, golds, timer)
    action = next(s for s in posed.questions if s.task == "action").take()
    assert len(action) == golds.counts["action"] and {q.form for q in action} == {"completion"}


def test_prefect_resolving_the_keep_tasks_inputs_stops_at_each_read_shard(tmp_path):
    """Prefect walks a task's resolved inputs (lists, tuples, dicts, dataclasses, pydantic models)
    looking for futures; a read shard's result must stop that walk, or the keep task's start meets
    every Trajectory, Step and Action of the build. Pickled (the shard cache, Dask) it stays whole."""
    import pickle

    from prefect.utilities.collections import visit_collection

    config = load_config(ROOT / "configs" / "swe_issue_fix.yaml").model_copy(
        update={"out_dir": str(tmp_path)}
    )
    scenario = build_stages.resolve_scenario(config)
    inputs = build_stages.plan_inputs(config, scenario)
    reads = [build_stages.read_shard.fn(shard, config.privacy) for shard in inputs.shards]
    steps = sum(len(t.steps) for r in reads for t in r.read.trajectories)
    assert steps > 10

    def walked(value: Any) -> int:
        met = []
        visit_collection(value, visit_fn=lambda x: met.append(x) or x, return_data=True, max_depth=-1)
        return len(met)

    assert walked(reads) == 1 + len(reads)  # the list, then each shard, not into it
    assert walked([r.read for r in reads]) > steps  # what the walk met when the shard was a NamedTuple
    back = pickle.loads(pickle.dumps(reads[0], protocol=pickle.HIGHEST_PROTOCOL))
    assert back.read == reads[0].read and back.found == reads[0].found
    assert (back.redacted, back.runs_redacted) == (reads[0].redacted, reads[0].runs_redacted)
