"""Adding a scenario is one package: a new one, defined outside the tree and registered by entry point, builds,
publishes and loads in lm-eval with zero edits to any file of aptforge; one missing its lm-eval prompt fails at
discovery naming the scenario and the task.

The package (`webnav_plugin`: a `web_nav` scenario with a `plan` MCQ and an `action` completion task, a reader
of its own log format, a sample, an LLM prompt template, and APTBench protocols: `plan`'s in the package's
`aptbench_prompts.yaml`, `action`'s inline in its TaskSpec) is written into a temporary folder together with a
`*.dist-info` whose `entry_points.txt` names it, which is all `importlib.metadata` needs to see an installed
distribution on `sys.path`.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from extractors.discovery import InvalidScenario, discover_extractors, discover_readers, prompt_dirs

ROOT = Path(__file__).resolve().parents[1]

READER = '''
"""Reader of web_nav_log records: one JSON object per navigation run."""

from extractors.base import reader
from schemas import Action, Outcome, Source, Step, Trajectory, content_id


@reader("web_nav_log", version=1, kind="web_nav", priority=15)
class WebNavLog:
    def sniff(self, record):
        return isinstance(record, dict) and record.get("format") == "web_nav_log"

    def read(self, record, origin):
        steps = tuple(
            Step(index=i, thought=s["plan"], action=Action(tool="browser", raw=s["action"]), observation=s["page"])
            for i, s in enumerate(record["steps"])
        )
        solved = bool(record["solved"])
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, record["id"]),
            kind="web_nav",
            task=record["goal"],
            prompt=record["goal"],
            steps=steps,
            outcome=Outcome(
                label="success" if solved else "failure", signal="row:solved", reason="solved" if solved else "unsolved"
            ),
            source=Source(
                format=self.name, reader_version=self.version, file=origin.file, line=origin.line,
                instance_id=record["site"], native_id=record["id"],
            ),
        )
'''

TASKS = '''
"""The two tasks of web_nav."""

from schemas import AptbenchPrompt, TaskSpec

SPECS = {
    "plan": TaskSpec(
        dataset="webnav", task="plan", form="mcq", n_options=4,
        fields=(("uuid", "str"), ("goal", "str"), ("history", "str"), ("choices", "str"), ("answer", "str")),
        context=("goal", "history"), answers=("choices", "answer"),
        guidelines="Accept when the gold is the step the successful run took next.",
    ),
    "action": TaskSpec(
        dataset="webnav", task="action", form="completion", n_options=0,
        fields=(("uuid", "str"), ("goal", "str"), ("history", "str"), ("answer", "str")),
        context=("goal", "history"), answers=("answer",),
        aptbench=ACTION_PROMPT,
    ),
}
'''

SCENARIO = '''
"""web_nav: the next plan and the next browser action of successful web-navigation runs."""

from extractors.base import extractor, gold_step
from webnav_plugin.web_nav.tasks import SPECS


@extractor("web_nav", version=1, reads={"web_nav"}, tasks=SPECS)
class WebNav:
    def extract(self, traj, task, options):
        last = len(traj.steps) - 1
        history = " | ".join(f"{s.thought} -> {s.action.raw}" for s in traj.steps[:last])
        step = traj.steps[last]
        gold = step.thought if task == "plan" else step.action.raw
        fields = {"goal": traj.task, "history": history}
        yield gold_step(self.name, self.version, traj, task, last, gold, fields, options.seed)
'''

PROMPT = """{# web_nav plan distractors, version 1 #}
=== system ===
You write wrong but plausible next steps for a web agent.
=== user ===
Goal: {{ fields.goal }}
Write {{ n }} wrong next steps as JSON.
"""

ACTION_PROMPT = """{"action": AptbenchPrompt(
            prompt="Request: Write the next browser action.\\nGoal: {{goal | trim}}\\nAction:\\n",
            answer="{{answer}}", extract="^([^\\\\n]*)", ignore="$^", fewshot_delimiter="\\n\\n",
            max_gen_toks=16, metrics=("exact_match",),
        )}"""

PLAN_PROTOCOL = """# APTBench-style protocol of web_nav's task files
plan:
  prompt: |-
    Request: Select the next step of the web agent.
    Goal: {{goal | trim}}
    History: {{history | trim}}
    Choices: {{choices | trim}}
    The next step is (
  answer: '{{answer}})'
  extract: \\b([A-Za-z])[\\)\\n]
  ignore: \\)$
  fewshot_delimiter: "\\n\\n"
  max_gen_toks: 10
  metrics:
  - exact_match
"""

SITES = ("shop", "wiki", "maps", "mail", "bank", "news")
LAST_PLANS = (
    "I need to add the blue kettle to the basket and proceed to checkout",
    "I need to open the article history tab to see who changed the infobox",
    "I need to switch the route planner to cycling and compare both paths",
    "I need to archive the newsletter thread and mark the invoice as read",
    "I need to download last month's statement as a PDF for the tax office",
    "I need to sort the headlines by date and read the oldest correction note",
)


def _runs() -> list[dict]:
    runs = []
    for i, site in enumerate(SITES):
        steps = [
            {
                "plan": f"I need to open the {site} start page",
                "action": f"goto('https://{site}.example/')",
                "page": site,
            },
            {
                "plan": f"I need to sign in to {site} with the test account",
                "action": f"click('#login-{i}')",
                "page": "ok",
            },
            {"plan": LAST_PLANS[i], "action": f"click('#{site}-final-{i}')", "page": "done"},
        ]
        goal = f"Finish task {i} on {site}"
        runs.append(
            {
                "format": "web_nav_log",
                "id": f"run-{i}",
                "site": site,
                "goal": goal,
                "solved": True,
                "steps": steps,
            }
        )
    runs.append(
        {**runs[0], "id": "run-failed", "goal": "Finish the shop task without signing in", "solved": False}
    )
    return runs


def _write_plugin(site: Path, dist: str, package: str, action_prompt: str) -> Path:
    """A scenario package plus the dist-info naming it in its entry points; returns the sample folder."""
    pkg = site / package
    scenario = pkg / "web_nav"
    (scenario / "prompts").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A scenario shipped outside aptforge."""\n')
    (pkg / "reader.py").write_text(READER)
    (scenario / "tasks.py").write_text(
        TASKS.replace("webnav_plugin", package).replace("ACTION_PROMPT", action_prompt)
    )
    (scenario / "__init__.py").write_text(SCENARIO.replace("webnav_plugin", package))
    (scenario / "prompts" / "web_nav.plan.v1.md.j2").write_text(PROMPT)
    (scenario / "aptbench_prompts.yaml").write_text(PLAN_PROTOCOL)
    samples = pkg / "samples" / "web_nav"
    samples.mkdir(parents=True)
    (samples / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _runs()))
    info = site / f"{dist}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[aptforge.extractors]\nweb_nav = {package}.web_nav\n\n[aptforge.readers]\nweb_nav_log = {package}.reader\n"
    )
    return samples


def _tracked_changes() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    ).stdout


@pytest.mark.flow
def test_a_scenario_defined_outside_the_tree_builds_publishes_and_loads_in_lm_eval(
    prefect_harness, tmp_path, monkeypatch
):
    from lm_eval.tasks import TaskManager, get_task_dict

    from annotations.queue import Queue
    from flows.build import run_build
    from flows.config import load_config
    from flows.publish import publish
    from generators.llm.prompting import PromptLibrary

    before = _tracked_changes()
    site = tmp_path / "site"
    samples = _write_plugin(site, "webnav-plugin", "webnav_plugin", ACTION_PROMPT)
    monkeypatch.syspath_prepend(str(site))

    extractors = discover_extractors()
    assert extractors["web_nav"].__module__ == "webnav_plugin.web_nav"
    assert "web_nav_log" in discover_readers()
    assert PromptLibrary.load(prompt_dirs(extractors)).get("web_nav", "plan") is not None

    config = tmp_path / "web_nav.yaml"
    config.write_text(
        textwrap.dedent(f"""
            scenario: web_nav
            version: v1
            sources: [{{path: {samples}}}]
            tasks: {{plan: {{}}, action: {{}}}}
            generator: {{name: offline}}
            seed: 7
            out_dir: {tmp_path / "out"}
            quality: {{overrides: {{plan: "contract test: six items"}}}}
        """)
    )
    cfg = load_config(config)
    report = run_build(cfg)
    assert report.questions_by_task == {"plan": 6, "action": 6}, report.problems_by_reason
    assert report.dropped_by_reason == {"unsolved": 1}
    assert report.quality.tasks["plan"].baselines is not None  # the scenario's MCQ task was audited

    queue = Queue(cfg.queue_path())
    for row in queue.items(limit=100):
        queue.decide(row.item_id, "ana", "accept", seen=queue.seen(row.item_id, "ana"))
    result = publish(cfg)
    counts = result["plan"]["counts"]  # test items; whole sites are held aside as few-shot demos
    assert set(counts) == {"webnav_action", "webnav_plan"} and all(0 < n < 6 for n in counts.values())
    release = Path(result["plan"]["release_dir"])
    official = [json.loads(line) for line in (release / "aptbench/webnav/plan/input_data.jsonl").open()]
    assert [list(r) for r in official] == [["uuid", "goal", "history", "choices", "answer"]] * counts[
        "webnav_plan"
    ]

    monkeypatch.chdir(release)  # a folder release's YAMLs name the folder as `.`
    manager = TaskManager(include_path=str(release / "lm_eval"), include_defaults=False)
    names = [
        "aptforge_webnav_plan_aptbench",
        "aptforge_webnav_plan_loglik",
        "aptforge_webnav_action_aptbench",
    ]
    tasks = get_task_dict(names, manager)
    plan_docs = list(tasks["aptforge_webnav_plan_aptbench"].test_docs())
    assert len(plan_docs) == counts["webnav_plan"]
    text = tasks["aptforge_webnav_plan_aptbench"].doc_to_text(plan_docs[0])
    assert text.startswith("Request: Select the next step of the web agent.")
    assert text.endswith("The next step is (")  # the protocol the package's aptbench_prompts.yaml declares
    assert len(tasks["aptforge_webnav_plan_loglik"].doc_to_choice(plan_docs[0])) == 4
    action_task = tasks["aptforge_webnav_action_aptbench"]
    action_doc = next(iter(action_task.test_docs()))
    assert action_task.doc_to_text(action_doc).startswith("Request: Write the next browser action.")  # inline
    assert action_task.doc_to_target(action_doc).startswith("click(")
    assert _tracked_changes() == before  # nothing of aptforge was edited


def test_a_scenario_without_an_lm_eval_prompt_fails_at_discovery_naming_it_and_the_task(
    tmp_path, monkeypatch
):
    site = tmp_path / "site"
    _write_plugin(site, "webnav-broken", "webnav_broken", "{}")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(
        InvalidScenario,
        match="scenario 'web_nav', task 'action': no APTBench \\(lm-eval\\) prompt for task file `action`",
    ):
        discover_extractors()
