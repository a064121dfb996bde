"""`make eval-demo`: the whole loop offline, build -> release -> eval on both protocols -> scorecard.

It builds the SWE sample release from the bundled samples into `out/eval-demo/` (every item is
accepted by the reviewer `eval-demo`, recorded as such in the queue: a demo release, never one to
publish), starts the n-gram language model of `flows.lm_server` on 127.0.0.1, and runs
`aptforge eval` on it with `--protocol aptbench` and `--protocol loglik`, printing both scorecards.
No network, no model download. Against a real model: `vllm serve MODEL` and the same `aptforge
eval` command with `--endpoint http://127.0.0.1:8000/v1 --model MODEL` (README).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_REVIEWER = "eval-demo"


def sample_release(config: Path, out_dir: Path) -> Path:
    """Build, accept everything as `eval-demo`, publish to a folder; returns the release folder."""
    from annotations.queue import Queue
    from flows.build import run_build
    from flows.config import load_config
    from flows.publish import publish, queue_path, release_dir

    cfg = load_config(config, out_dir=out_dir)
    run_build(cfg)
    queue = Queue(queue_path(cfg))
    for row in queue.items(status="pending", limit=1_000_000):
        queue.decide(
            row.item_id,
            DEMO_REVIEWER,
            "accept",
            seen=queue.seen(row.item_id, DEMO_REVIEWER),
            note="eval demo: not human-reviewed",
        )
    publish(cfg)
    return release_dir(cfg)


def main(argv: list[str] | None = None) -> None:
    """Run the demo."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "swe_issue_fix.yaml")
    parser.add_argument("--out", type=Path, default=Path("out") / "eval-demo")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    for key, value in {"PREFECT_LOGGING_LEVEL": "WARNING", "DO_NOT_TRACK": "1"}.items():
        os.environ.setdefault(key, value)
    from flows.eval_cli import out, print_scorecard
    from flows.evaluate import EvalConfig, eval_benchmark
    from flows.lm_server import CompletionsServer, train_default

    folder = sample_release(args.config, args.out.resolve())
    out.print(f"sample release: {folder}", highlight=False)
    model = train_default()
    with CompletionsServer(model) as server:
        out.print(f"n-gram stand-in model {model.name} at {server.base_url}", highlight=False)
        for protocol in ("aptbench", "loglik"):
            cfg = EvalConfig(
                release=str(folder),
                endpoint=server.base_url,
                model=model.name,
                protocol=protocol,  # type: ignore[arg-type]
                limit=args.limit,
                out_dir=str(args.out / "eval" / protocol),
            )
            print_scorecard(eval_benchmark(cfg))
            out.print(f"scorecard: {cfg.out_dir}/scorecard.html", highlight=False)


if __name__ == "__main__":
    main()
