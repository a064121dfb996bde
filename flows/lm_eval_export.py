"""lm-evaluation-harness task YAMLs of a release: two protocols per published config, named clearly.

- `aptforge_<config>_aptbench`: APTBench's own protocol: its few-shot prompt (the query block of its
  template, the demos drawn from the release's held-aside `fewshot` split, never from test items),
  greedy generation, its answer extraction as a regex filter and its metric (exact match of the
  letter, command or answer; ROUGE-L for answers).
- `aptforge_<config>_loglik`: log-likelihood. MCQ: the same prompt and demos, the options scored as
  the letters that follow the cue (`A)`, `B)`, ...), `acc`; completion: the log-likelihood of the
  gold continuation (`perplexity`, and `acc` = the gold is the greedy continuation). MCQ configs also
  get `aptforge_<config>_loglik_options`: the option texts themselves scored after the cue, `acc` and
  `acc_norm` (length-normalised), lm-eval's classic form.

The per-task protocol (prompt, answer format, extraction, delimiter, token budget, metrics) is data
declared by each scenario (`TaskSpec.aptbench`, usually from `extractors/<scenario>/aptbench_prompts.yaml`,
folded in at discovery); nothing here names a task.
A folder release's YAMLs read the Parquet files by relative path (run lm-eval from the release
folder); a Hub release's read the repo at the release tag. Pure: same inputs, same bytes.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

import yaml

from schemas import AptbenchPrompt

_FUNCTION = "__aptforge_function__:"
_LETTERS = string.ascii_uppercase

#: Module shipped beside the YAMLs (`!function aptforge_metrics.rouge_l`): ROUGE-L F1 with CJK characters as tokens.
METRICS_MODULE = '''"""Metrics of the aptforge lm-eval tasks (lm-eval loads this file through `!function`)."""

import re

from rouge_score import rouge_scorer

_TOKEN = re.compile(r"[\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff]|[^\\W_]+", re.UNICODE)


class _Tokenizer:
    def tokenize(self, text):
        return _TOKEN.findall(text.lower())


_SCORER = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Tokenizer())


def rouge_l(references, predictions):
    """ROUGE-L F1 of one prediction against its reference (words; CJK characters count one each)."""
    return _SCORER.score(references[0], predictions[0])["rougeL"].fmeasure
'''


def split_cue(prompt: str) -> tuple[str, str]:
    """(body, cue) of a query block: the cue is its last line (with its newline, if the block ends in one)."""
    core, newline = (prompt[:-1], "\n") if prompt.endswith("\n") else (prompt, "")
    head, _, cue = core.rpartition("\n")
    return (head + "\n" if head else ""), cue + newline


def _metric(name: str) -> dict[str, Any]:
    return {"metric": name, "aggregation": "mean", "higher_is_better": True}


def _function(name: str) -> str:
    return _FUNCTION + name


class _Dumper(yaml.SafeDumper):
    """Readable task files: multi-line prompts as literal blocks, short strings with newlines double-quoted."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value.strip("\n") and not value.endswith(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _dump(doc: Mapping[str, Any]) -> bytes:
    text = yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    # lm-eval's `!function` tag cannot be emitted by safe_dump: a marker string becomes the tag.
    text = re.sub(rf"'?{_FUNCTION}([\w.]+)'?", r"!function \1", text)
    return text.encode("utf-8")


def data_source(config: str, repo_id: str | None, version: str, fewshot: bool) -> dict[str, Any]:
    """Where lm-eval reads a config: the Hub repo at the release tag, else this folder's Parquet files."""
    if repo_id:
        return {"dataset_path": repo_id, "dataset_name": config, "dataset_kwargs": {"revision": version}}
    files = {"test": f"data/{config}/test-*.parquet"}
    if fewshot:
        files["fewshot"] = f"data/{config}/fewshot-*.parquet"
    return {"dataset_path": "parquet", "dataset_kwargs": {"data_files": files}}


def _common(
    name: str, protocol: str, p: AptbenchPrompt, source: Mapping[str, Any], n_fewshot: int
) -> dict[str, Any]:
    doc: dict[str, Any] = {"task": f"aptforge_{name}_{protocol}", "tag": ["aptforge", f"aptforge_{protocol}"]}
    doc.update(source)
    doc["test_split"] = "test"
    if n_fewshot:
        doc.update(fewshot_split="fewshot", num_fewshot=n_fewshot, fewshot_config={"sampler": "first_n"})
    doc.update(doc_to_text=p.prompt, target_delimiter="", fewshot_delimiter=p.fewshot_delimiter)
    return doc


def aptbench_task(name: str, p: AptbenchPrompt, source: Mapping[str, Any], n_fewshot: int) -> bytes:
    """`aptforge_<name>_aptbench`: generate greedily, extract as APTBench does, score as it does."""
    doc = _common(name, "aptbench", p, source, n_fewshot)
    metrics: list[dict[str, Any]] = []
    for metric in p.metrics:
        if metric == "exact_match":
            metrics.append(
                {
                    "metric": "exact_match",
                    "aggregation": "mean",
                    "higher_is_better": True,
                    "regexes_to_ignore": [p.ignore],
                }
            )
        else:
            metrics.append(
                {
                    "metric": _function(f"aptforge_metrics.{metric}"),
                    "aggregation": "mean",
                    "higher_is_better": True,
                }
            )
    extract = {"function": "regex", "regex_pattern": p.extract, "group_select": 0, "fallback": "[invalid]"}
    doc.update(
        doc_to_target=p.answer,
        output_type="generate_until",
        generation_kwargs={
            "until": [p.fewshot_delimiter],
            "do_sample": False,
            "temperature": 0.0,
            "max_gen_toks": p.max_gen_toks,
        },
        filter_list=[{"name": "aptbench", "filter": [extract, {"function": "take_first"}]}],
        metric_list=metrics,
        metadata={"version": 1, "protocol": "aptbench"},
    )
    return _dump(doc)


def loglik_task(name: str, form: str, p: AptbenchPrompt, source: Mapping[str, Any], n_fewshot: int) -> bytes:
    """`aptforge_<name>_loglik`: MCQ letters by log-likelihood, or the gold continuation's log-likelihood."""
    doc = _common(name, "loglik", p, source, n_fewshot)
    closer = p.answer.replace("{{answer}}", "")
    if form == "mcq":
        letters = [f"{letter}{closer}" for letter in _LETTERS]
        doc.update(
            doc_to_choice="{{ " + repr(letters) + "[:options | length] }}",
            doc_to_target="gold_index",
            output_type="multiple_choice",
            metric_list=[_metric("acc")],
        )
    else:
        doc.update(
            doc_to_target=p.answer,
            output_type="loglikelihood",
            metric_list=[
                {"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                _metric("acc"),
            ],
        )
    doc["metadata"] = {"version": 1, "protocol": "loglik"}
    return _dump(doc)


def loglik_options_task(name: str, p: AptbenchPrompt, source: Mapping[str, Any], n_fewshot: int) -> bytes:
    """`aptforge_<name>_loglik_options` (MCQ): the option texts as continuations of the cue, `acc` and `acc_norm`."""
    doc = _common(name, "loglik_options", p, source, n_fewshot)
    doc.update(
        doc_to_text=p.prompt.rstrip("(").rstrip(),
        target_delimiter=" ",
        doc_to_choice="{{options}}",
        doc_to_target="gold_index",
        output_type="multiple_choice",
        metric_list=[_metric("acc"), _metric("acc_norm")],
        metadata={"version": 1, "protocol": "loglik_options"},
    )
    return _dump(doc)


def lm_eval_files(
    name: str, form: str, prompt: AptbenchPrompt, source: Mapping[str, Any], n_fewshot: int
) -> dict[str, bytes]:
    """The task files of one published config (MCQ configs add `_loglik_options`)."""
    files = {
        f"lm_eval/{name}_aptbench.yaml": aptbench_task(name, prompt, source, n_fewshot),
        f"lm_eval/{name}_loglik.yaml": loglik_task(name, form, prompt, source, n_fewshot),
    }
    if form == "mcq":
        files[f"lm_eval/{name}_loglik_options.yaml"] = loglik_options_task(name, prompt, source, n_fewshot)
    return files
