"""`aptforge eval --protocol loglik` against lm-eval's `local-completions` on the same server and our YAML.

Both read the same release, build their prompts independently (ours in `flows.eval_prompts`, lm-eval's
from `lm_eval/<config>_loglik.yaml`) and score the same continuations through the n-gram server's
prompt log-probabilities: the contexts, the log-likelihoods and the per-item choices must agree.
This cross-checks our eval and our lm-eval export at once.
"""

from __future__ import annotations

import hashlib
import math

import pyarrow.parquet as pq

from flows.evaluate import EvalConfig, evaluate
from flows.lm_server import CompletionsServer, train_default
from tests.eval_support import sample_release

LIMIT = 3


def test_loglik_choices_equal_lm_eval_local_completions(samples_dir, tmp_path, monkeypatch):
    import datasets
    import lm_eval
    from lm_eval.tasks import TaskManager

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    release, ngram = sample_release(tmp_path / "release", samples_dir), train_default()
    monkeypatch.chdir(release)  # a folder release's task files read its Parquet files by relative path
    config = "issue_fix_plan"
    assert (release / "lm_eval" / f"{config}_loglik.yaml").is_file()
    with CompletionsServer(ngram) as server:
        cfg = EvalConfig(
            release=str(release),
            endpoint=server.base_url,
            model=ngram.name,
            protocol="loglik",
            tasks=(config,),
            limit=LIMIT,
            out_dir=str(tmp_path / "ours"),
        )
        evaluate(cfg)
        args = f"model={ngram.name},base_url={server.base_url}/completions,tokenizer_backend=remote"
        result = lm_eval.simple_evaluate(
            model="local-completions",
            model_args=args + ",num_concurrent=1,max_retries=1,max_length=10000000",
            tasks=[f"aptforge_{config}_loglik", f"aptforge_{config}_loglik_options"],
            task_manager=TaskManager(include_path=str(release / "lm_eval")),
            log_samples=True,
            limit=LIMIT,
        )
    ours = {p["item_id"]: p for p in pq.read_table(tmp_path / "ours" / "predictions.parquet").to_pylist()}
    samples = result["samples"][f"aptforge_{config}_loglik"]
    assert len(samples) == LIMIT == len(ours)
    for sample in samples:
        mine = ours[sample["doc"]["item_id"]]
        contexts = {ctx for ctx, _ in sample["arguments"]}
        assert len(contexts) == 1
        assert hashlib.sha256(contexts.pop().encode()).hexdigest() == mine["prompt_sha256"]
        theirs = [resp[0][0] for resp in sample["resps"]]
        assert all(
            math.isclose(a, b, abs_tol=1e-9) for a, b in zip(theirs, mine["letter_logprobs"], strict=True)
        )
        assert max(range(len(theirs)), key=lambda i: (theirs[i], -i)) == "ABCDEFG".index(mine["extracted"])
        assert sample["acc"] == float(mine["correct"])
    for sample in result["samples"][f"aptforge_{config}_loglik_options"]:  # option texts, length-normalised
        mine = ours[sample["doc"]["item_id"]]
        theirs = [resp[0][0] for resp in sample["resps"]]
        assert all(
            math.isclose(a, b, abs_tol=1e-9) for a, b in zip(theirs, mine["option_logprobs"], strict=True)
        )
        assert sample["acc_norm"] == float(mine["correct_norm"])
