"""The extension points: tag, then collect; read-only mappings; loud duplicates; helpful misses."""

from __future__ import annotations

import sys
import textwrap

import pytest

from extractors.discovery import (
    DuplicateComponent,
    InvalidScenario,
    UnknownComponent,
    discover_extractors,
    discover_readers,
    lookup,
)
from schemas import task_spec


def test_discovery_finds_the_in_tree_readers_and_extractors_by_module_name():
    readers = discover_readers()
    assert {"swe_agent_traj", "swe_rows"} <= set(readers)
    extractors = discover_extractors()
    assert extractors["swe_issue_fix"].__module__ == "extractors.swe_issue_fix"
    with pytest.raises(TypeError):
        readers["x"] = object  # type: ignore[index]


def test_readers_are_ordered_by_sniffing_priority():
    prios = [cls.priority for cls in discover_readers().values()]
    assert prios == sorted(prios)


def test_a_lookup_miss_names_the_close_matches():
    with pytest.raises(UnknownComponent, match="Did you mean swe_issue_fix"):
        lookup(discover_extractors(), "swe_issue_fx", "extractor")


SPEC = """
from schemas import AptbenchPrompt, TaskSpec

PLAN = TaskSpec(
    dataset="alpha_set", task="plan", form="mcq", n_options=4,
    fields=(("uuid", "str"), ("trajs", "str"), ("choices", "str"), ("answer", "str")),
    context=("trajs",), answers=("choices", "answer"),
    aptbench={prompt},
)
"""


def _scenario(
    pkg,
    module: str,
    name: str,
    prompt: str = (
        '{"plan": AptbenchPrompt(prompt="Pick.\\n{{trajs}}\\n{{choices}}\\nAnswer: (", answer="{{answer}})", '
        'extract="([A-D])", ignore="\\\\)$", fewshot_delimiter="\\n\\n", max_gen_toks=4, metrics=("exact_match",))}'
    ),
) -> None:
    body = SPEC.format(prompt=prompt) + textwrap.dedent(f"""
        from extractors.base import extractor

        @extractor("{name}", version=1, reads={{"swe"}}, tasks={{"plan": PLAN}})
        class X:
            def extract(self, traj, task, options):
                return iter(())
    """)
    (pkg / f"{module}.py").write_text(body)
    sys.modules.pop(f"{pkg.name}.{module}", None)


def test_a_new_scenario_is_one_module_and_duplicates_fail_loudly(tmp_path, monkeypatch):
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    _scenario(pkg, "alpha", "alpha")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover_extractors(package="plugpkg", group="aptforge.none")
    assert list(found) == ["alpha"] and found["alpha"].version == 1
    assert task_spec("alpha", "plan").dataset == "alpha_set"  # discovery registered its spec
    _scenario(pkg, "beta", "alpha")
    with pytest.raises(DuplicateComponent, match="alpha"):
        discover_extractors(package="plugpkg", group="aptforge.none")


def test_a_scenario_without_an_lm_eval_prompt_fails_at_discovery_naming_scenario_and_task(
    tmp_path, monkeypatch
):
    pkg = tmp_path / "noprompt"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    _scenario(pkg, "gamma", "gamma", prompt="{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        InvalidScenario,
        match=r"scenario 'gamma', task 'plan': no APTBench \(lm-eval\) prompt for task file `plan`",
    ):
        discover_extractors(package="noprompt", group="aptforge.none")


def test_a_prompt_file_for_an_unknown_task_fails_at_discovery(tmp_path, monkeypatch):
    pkg = tmp_path / "strayprompt"
    (pkg / "delta" / "prompts").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    _scenario(pkg / "delta", "__init__", "delta")
    (pkg / "delta" / "prompts" / "delta.nope.v1.md.j2").write_text(
        "{# x #}\n=== system ===\ns\n=== user ===\nu\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidScenario, match=r"delta\.nope\.v1\.md\.j2"):
        discover_extractors(package="strayprompt", group="aptforge.none")


def test_a_package_prompt_file_is_folded_into_the_specs_and_a_bad_entry_fails_naming_it(
    tmp_path, monkeypatch
):
    """A scenario may declare its APTBench protocol in `aptbench_prompts.yaml`: discovery folds it into the
    TaskSpec; a protocol for no task file, or one missing a field, fails naming the scenario, file and entry."""
    pkg = tmp_path / "filedprompt"
    (pkg / "eps").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    _scenario(pkg / "eps", "__init__", "eps", prompt="{}")
    protocol = (
        "plan:\n  prompt: 'Pick. {{trajs}} {{choices}} Answer: ('\n  answer: '{{answer}})'\n"
        "  extract: '([A-D])'\n  ignore: '\\)$'\n  fewshot_delimiter: \"\\n\\n\"\n  max_gen_toks: 4\n"
        "  metrics: [exact_match]\n"
    )
    prompts = pkg / "eps" / "aptbench_prompts.yaml"
    prompts.write_text(protocol)
    monkeypatch.syspath_prepend(str(tmp_path))
    discover_extractors(package="filedprompt", group="aptforge.none")
    assert task_spec("eps", "plan").aptbench["plan"].answer == "{{answer}})"
    prompts.write_text(protocol + protocol.replace("plan:", "plan_zh:"))
    with pytest.raises(
        InvalidScenario, match=r"scenario 'eps': .*aptbench_prompts\.yaml declares prompts for plan_zh"
    ):
        discover_extractors(package="filedprompt", group="aptforge.none")
    prompts.write_text(protocol.replace("  max_gen_toks: 4\n", ""))
    with pytest.raises(
        InvalidScenario,
        match=r"scenario 'eps': .*aptbench_prompts\.yaml: `plan`: max_gen_toks: Field required",
    ):
        discover_extractors(package="filedprompt", group="aptforge.none")
