"""`make bench`: every benchmark in one run, one table, and `bench/results.json`.

Each figure is a ratio against a baseline measured in the same run on the same machine (so a busy
or slow machine moves both sides): ingest against a plain `orjson` parse of the same bytes, Prefect
tasks against plain calls, the LLM stage against the bare official SDK at 100 ms stand-in latency,
a warm rebuild against a cold one, Dask against threads, rapidfuzz centrality against difflib,
peak memory while ingesting more than 1 GB, offline generation time per gold step at 20,000
gold steps against 1,000, and whole builds of 1,000 / 5,000 generated runs (20,000 with
`APTFORGE_BENCH_SCALE_SIZES=1000,5000,20000`): time per run and peak RSS of the process tree.
Each benchmark runs in its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    ("ingest", ["bench_ingest.py"]),
    ("llm", ["bench_llm.py"]),
    ("pipeline", ["bench_pipeline.py"]),
    ("centrality", ["bench_centrality.py"]),
    ("offline", ["bench_offline.py"]),
    ("scale", ["bench_scale.py"]),
]


def _run(name: str, argv: list[str], tmp: Path) -> tuple[dict, int, float]:
    out = tmp / f"{name}.json"
    start = time.perf_counter()
    code = subprocess.call([sys.executable, str(HERE / argv[0]), *argv[1:], "--json-out", str(out)])
    seconds = time.perf_counter() - start
    return (json.loads(out.read_text()) if out.exists() else {}), code, seconds


def rows(results: dict[str, dict]) -> list[tuple[str, str, str, bool | None]]:
    """(figure, value, goal, met) for the table."""
    i, l_, p, c, o, sc = (
        results.get(k, {}) for k in ("ingest", "llm", "pipeline", "centrality", "offline", "scale")
    )
    pr, rb, dk = p.get("prefect", {}), p.get("rebuild", {}), p.get("dask", {})
    out: list[tuple[str, str, str, bool | None]] = []
    if "read_ratio" in i:
        out += [
            (
                "ingest time / orjson parse (same bytes)",
                f"{i['read_ratio']:.2f}",
                "<= 2.0",
                i["read_ratio"] <= 2.0,
            ),
            ("  decode layer only / orjson parse", f"{i['decode_ratio']:.2f}", "", None),
            (
                f"peak RSS ingesting {i['input_gib']:.2f} GiB",
                f"{i['peak_rss_mib']:.0f} MiB",
                "< 1024 MiB",
                i["peak_rss_mib"] < 1024,
            ),
        ]
    if "ratio" in pr:
        out += [
            ("Prefect overhead per shard", f"{pr['overhead_per_shard_ms']:.0f} ms", "", None),
            ("  read stage as Prefect tasks / plain calls", f"{pr['ratio']:.2f}", "", None),
        ]
    if "throughput_ratio" in l_:
        out += [
            (
                "LLM stage throughput / bare SDK (100 ms, C=16)",
                f"{l_['throughput_ratio']:.2f}",
                ">= 0.9",
                l_["throughput_ratio"] >= 0.9,
            ),
            ("  aptforge / ideal (N x latency / C)", f"{l_['aptforge_ideal_ratio']:.2f}", "", None),
            ("  bare SDK / ideal", f"{l_['reference_ideal_ratio']:.2f}", "", None),
            (
                "  client CPU per 1,000 requests (aptforge / SDK)",
                f"{l_['aptforge_cpu_per_1k_s']:.2f} s / {l_['reference_cpu_per_1k_s']:.2f} s",
                "",
                None,
            ),
        ]
    for key, label in (("reasks", "re-asks 1 in 8"), ("stage", "flow generate stage, re-asks")):
        case = l_.get(key) if l_ else None
        if case:
            out += [
                (
                    f"LLM {label} / bare SDK ({case['requests']} requests)",
                    f"{case['throughput_ratio']:.2f}",
                    ">= 0.9",
                    case["throughput_ratio"] >= 0.9,
                )
            ]
    if "ratio" in rb:
        out += [
            ("warm rebuild / cold (LLM at 100 ms)", f"{rb['ratio']:.2f}", "<= 0.2", rb["ratio"] <= 0.2),
            ("  LLM requests in the warm rebuild", str(rb["warm_requests"]), "0", rb["warm_requests"] == 0),
        ]
    if "ratio" in dk:
        out += [
            (
                "Dask (2 workers) / threads, same input",
                f"{dk['ratio']:.2f}",
                "identical output",
                dk["identical"],
            )
        ]
    if "speedup" in c:
        out += [("most-central baseline: difflib / rapidfuzz time", f"{c['speedup']:.0f}x", "", None)]
    if "sizes" in o:
        sizes = o["sizes"]
        out += [
            (
                f"offline generate per step, {sizes[-1]['steps']:,} / {sizes[0]['steps']:,} gold steps",
                f"{o['ratio']:.2f}",
                f"<= {o['goal']}",
                o["ratio"] <= o["goal"],
            ),
            *(
                (f"  s per 1,000 gold steps at {r['steps']:,}", f"{r['per_1k_s']:.2f}", "", None)
                for r in sizes
            ),
        ]
    if sc.get("sizes"):
        runs = sc["sizes"]
        first, last = runs[0], runs[-1]
        out += [
            (
                f"build time per run, {last['runs']:,} / {first['runs']:,} runs",
                f"{sc['time_ratio']:.2f}",
                f"<= {sc['time_goal']}",
                sc["time_ratio"] <= sc["time_goal"],
            ),
            (
                f"peak RSS of the process tree at {last['runs']:,} runs",
                f"{last['peak_rss_mib']:.0f} MiB",
                f"< {sc['rss_limit_mib']} MiB, x{sc['rss_goal']}",
                last["peak_rss_mib"] < sc["rss_limit_mib"] and sc["rss_ratio"] <= sc["rss_goal"],
            ),
            *(
                (
                    f"  {r['runs']:,} runs ({r['runner']}): ms per run / peak RSS / x orjson floor",
                    f"{r['per_run_ms']:.1f} / {r['peak_rss_mib']:.0f} / {r['floor_ratio']:.0f}",
                    "",
                    None,
                )
                for r in runs
            ),
        ]
    return out


def main() -> int:
    results: dict[str, dict] = {}
    failures = []
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-") as tmp:
        for name, argv in BENCHES:
            print(f"== {name}", flush=True)
            data, code, seconds = _run(name, argv, Path(tmp))
            results[name] = {**data, "exit_code": code, "wall_s": round(seconds, 1)}
            if code != 0:
                failures.append(name)
    table = rows(results)
    width = max(len(r[0]) for r in table) if table else 20
    print("\n" + f"{'figure':<{width}}  {'value':>22}  {'goal':<18} met")
    for figure, value, goal, met in table:
        mark = "" if met is None else ("yes" if met else "NO")
        print(f"{figure:<{width}}  {value:>22}  {goal:<18} {mark}")
    (HERE / "results.json").write_text(json.dumps({"results": results, "table": table}, indent=2) + "\n")
    print(
        f"\nwritten: {HERE / 'results.json'}"
        + (f"; benchmarks that missed a goal: {', '.join(failures)}" if failures else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
