"""`make bench`: every benchmark in one run, one table, and `bench/results.json`.

Each figure is a ratio against a baseline measured in the same run on the same machine (so a busy
or slow machine moves both sides): ingest against a plain `orjson` parse of the same bytes, Prefect
tasks against plain calls, the LLM stage against the bare official SDK at 100 ms stand-in latency,
a warm rebuild against a cold one, Dask against threads, rapidfuzz centrality against difflib,
peak memory while ingesting more than 1 GB, and offline generation time per gold step at 20,000
gold steps against 1,000. Each benchmark runs in its own process.
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
]


def _run(name: str, argv: list[str], tmp: Path) -> tuple[dict, int, float]:
    out = tmp / f"{name}.json"
    start = time.perf_counter()
    code = subprocess.call([sys.executable, str(HERE / argv[0]), *argv[1:], "--json-out", str(out)])
    seconds = time.perf_counter() - start
    return (json.loads(out.read_text()) if out.exists() else {}), code, seconds


def rows(results: dict[str, dict]) -> list[tuple[str, str, str, bool | None]]:
    """(figure, value, goal, met) for the table."""
    i, l_, p, c, o = (results.get(k, {}) for k in ("ingest", "llm", "pipeline", "centrality", "offline"))
    pr, rb, dk = p.get("prefect", {}), p.get("rebuild", {}), p.get("dask", {})
    out: list[tuple[str, str, str, bool | None]] = []
    if i:
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
    if pr:
        out += [
            ("Prefect overhead per shard", f"{pr['overhead_per_shard_ms']:.0f} ms", "", None),
            ("  read stage as Prefect tasks / plain calls", f"{pr['ratio']:.2f}", "", None),
        ]
    if l_:
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
    if rb:
        out += [
            ("warm rebuild / cold (LLM at 100 ms)", f"{rb['ratio']:.2f}", "<= 0.2", rb["ratio"] <= 0.2),
            ("  LLM requests in the warm rebuild", str(rb["warm_requests"]), "0", rb["warm_requests"] == 0),
        ]
    if dk:
        out += [
            (
                "Dask (2 workers) / threads, same input",
                f"{dk['ratio']:.2f}",
                "identical output",
                dk["identical"],
            )
        ]
    if c:
        out += [("most-central baseline: difflib / rapidfuzz time", f"{c['speedup']:.0f}x", "", None)]
    if o:
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
