"""`make bench`: every benchmark in one run, one table, and `bench/results.json`.

Each figure is a ratio against a baseline measured in the same run on the same machine (so a busy
or slow machine moves both sides): ingest against a plain `orjson` parse of the same bytes, Prefect
tasks against plain calls, the LLM stage against the bare official SDK at 100 ms stand-in latency,
a warm rebuild against a cold one, Dask against threads, rapidfuzz centrality against difflib,
peak memory while ingesting more than 1 GB, offline generation time per gold step at 20,000
gold steps against 1,000, the dedup index's bytes per item against datasketch's `MinHashLSH` layout
of the same items (20,000 / 50,000 / 100,000), the offline generator's pool index's bytes per entry
against its datasketch `MinHashLSHForest` layout (25,000 / 75,000 / 225,000 entries), and whole builds of 1,000 / 5,000 / 20,000 generated runs (fewer with
`APTFORGE_BENCH_SCALE_SIZES=1000,5000`): time per run and peak RSS of the process tree.
Then a Dask (2 workers) / threads comparison at 5,000 runs, a build killed with SIGKILL and restarted,
and 100,000 small rows (a few hundred bytes each), which must build in minutes within the memory bound.
Each benchmark runs in its own process. `results.json` is rewritten (atomically) after each one,
with an `acceptance` section of the figures the goals name; `--only scale llm` reruns some and keeps
the others' figures from the last file (so a long run can be split).
"""

from __future__ import annotations

import argparse
import json
import os
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
    ("dedup", ["bench_dedup.py"]),
    ("pool-index", ["bench_pool_index.py"]),
    ("scale", ["bench_scale.py", "--dask-sizes"]),
    ("scale-dask", ["bench_scale.py", "--sizes", "5000", "--dask-sizes", "1000", "5000", "20000"]),
    ("resume", ["bench_resume.py"]),
    ("scale-small", ["bench_scale.py", "--small", "--sizes", "100000", "--dask-sizes"]),
]
#: 100,000 small rows must build "in minutes, not hours", within the scale benchmark's memory bound.
SMALL_WALL_GOAL_S = 900


def _run(name: str, argv: list[str], tmp: Path) -> tuple[dict, int, float]:
    out = tmp / f"{name}.json"
    start = time.perf_counter()
    code = subprocess.call([sys.executable, str(HERE / argv[0]), *argv[1:], "--json-out", str(out)])
    seconds = time.perf_counter() - start
    return (json.loads(out.read_text()) if out.exists() else {}), code, seconds


def _scale_rows(sc: dict) -> list[tuple[str, str, str, bool | None]]:
    """The scale benchmark's rows: the time and RSS goals on threads, then each size."""
    threads = [r for r in sc.get("sizes") or [] if r["runner"] == "threads"]
    if not threads:
        return []
    first, last = threads[0], threads[-1]
    return [
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
        *_size_rows(threads),
    ]


def _dask_rows(sd: dict) -> list[tuple[str, str, str, bool | None]]:
    """Dask against threads on the same corpus: identical outputs, and the build process's RSS."""
    out: list[tuple[str, str, str, bool | None]] = [
        (f"Dask (2 workers) / threads outputs at {int(n):,} runs", "", "identical", same)
        for n, same in (sd.get("dask_identical") or {}).items()
    ]
    if sd.get("dask_flow_rss_ratio"):
        ratio, goal = sd["dask_flow_rss_ratio"], sd.get("dask_flow_rss_goal")
        row = ("build process RSS under Dask, largest / smallest N", f"{ratio:.2f}")
        if goal:
            out.append((*row, f"<= {goal} (flat)", ratio <= goal))
        else:
            out.append((*row, "flat", None))
    return out + _size_rows([r for r in sd.get("sizes") or [] if r["runner"] == "dask"])


def _resume_rows(rs: dict) -> list[tuple[str, str, str, bool | None]]:
    """The SIGKILL-and-restart build: shards redone against those unfinished, same candidates."""
    if "redone" not in rs:
        return []
    return [
        (
            f"SIGKILL at {rs['runs']:,} runs, restart: shards redone / unfinished",
            f"{rs['redone']} / {rs['unfinished']}",
            "equal, cached untouched",
            rs["redone"] == rs["unfinished"] and rs["cached_untouched"],
        ),
        (
            "  restarted build's candidates = uninterrupted build's",
            "",
            "identical",
            rs["identical_candidates"],
        ),
    ]


def _small_rows(ss: dict) -> list[tuple[str, str, str, bool | None]]:
    """The build of many small rows: its wall time and the peak RSS of its process tree."""
    sizes = ss.get("sizes") or []
    if not sizes:
        return []
    r = sizes[-1]
    return [
        (
            f"{r['runs']:,} small rows: wall / peak RSS of the process tree",
            f"{r['wall_s']:.0f} s / {r['peak_rss_mib']:.0f} MiB",
            f"< {SMALL_WALL_GOAL_S} s, < {ss.get('rss_limit_mib', 2048)} MiB",
            r["wall_s"] < SMALL_WALL_GOAL_S and r["peak_rss_mib"] < ss.get("rss_limit_mib", 2048),
        )
    ]


def _size_rows(runs: list[dict]) -> list[tuple[str, str, str, bool | None]]:
    return [
        (
            f"  {r['runs']:,} runs ({r['runner']}): ms per run / peak RSS / build process / x orjson floor",
            f"{r['per_run_ms']:.1f} / {r['peak_rss_mib']:.0f} / {r.get('flow_rss_mib', 0):.0f} / {r['floor_ratio']:.0f}",
            "",
            None,
        )
        for r in runs
    ]


def _compact_rows(
    d: dict, what: str, units: tuple[str, str], base: str, base_label: str, same: str
) -> list[tuple[str, str, str, bool | None]]:
    """A compact index against the layout it replaced, measured on the same input (`bench_dedup`:
    the dedup index, per item; `bench_pool_index`: the offline generator's pool index, per entry)."""
    sizes = d.get("sizes") or []
    if not sizes:
        return []
    unit, count = units  # (singular, plural): the plural is the key of a size's count
    return [
        (
            f"{what} bytes per {unit} / {base_label}",
            f"{d['memory_ratio']:.2f}",
            f"<= {d['memory_goal']}",
            d["memory_ratio"] <= d["memory_goal"],
        ),
        (
            f"  time per {unit} / {base_label}",
            f"{d['time_ratio']:.2f}",
            f"<= {d['time_goal']}",
            d["time_ratio"] <= d["time_goal"],
        ),
        (
            f"  bytes per {unit}, {sizes[-1][count]:,} / {sizes[0][count]:,} {count}",
            f"{d['flat_ratio']:.2f}",
            f"<= {d['flat_goal']}",
            d["flat_ratio"] <= d["flat_goal"],
        ),
        (f"  same {same} as the {base_label}", "", "identical", d["identical"]),
        *(
            (
                f"  {r[count]:,} {count}: bytes per {unit} ({base_label})",
                f"{r['compact'][f'bytes_per_{unit}']:.0f} ({r[base][f'bytes_per_{unit}']:.0f})",
                "",
                None,
            )
            for r in sizes
        ),
    ]


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
    out += _compact_rows(
        results.get("dedup", {}),
        "dedup index",
        ("item", "items"),
        "minhashlsh",
        "MinHashLSH layout",
        "Problems",
    )
    out += _compact_rows(
        results.get("pool-index", {}),
        "pool index",
        ("entry", "entries"),
        "datasketch",
        "datasketch layout",
        "answers",
    )
    out += (
        _scale_rows(sc)
        + _dask_rows(results.get("scale-dask", {}))
        + _resume_rows(results.get("resume", {}))
        + _small_rows(results.get("scale-small", {}))
    )
    return out


def acceptance(results: dict[str, dict]) -> dict[str, object]:
    """The figures the acceptance lines name, by one flat key each (None: that benchmark did not run)."""
    i, l_, o, sc = (results.get(k, {}) for k in ("ingest", "llm", "offline", "scale"))
    dk = results.get("pipeline", {}).get("dask", {})
    sd = results.get("scale-dask", {})
    small = results.get("scale-small", {}).get("sizes") or []
    threads = [r for r in sc.get("sizes", []) if r["runner"] == "threads"]
    by_size = {
        f"{r['runs']}_{r['runner']}": {
            k: r.get(k) for k in ("per_run_ms", "peak_rss_mib", "flow_rss_mib", "wall_s", "floor_ratio")
        }
        for r in sc.get("sizes", []) + [r for r in sd.get("sizes", []) if r["runner"] == "dask"]
    }
    return {
        "ingest_ratio": i.get("read_ratio"),
        "ingest_peak_rss_mib": i.get("peak_rss_mib"),
        "llm_ratio": l_.get("throughput_ratio"),
        "llm_reask_ratio": l_.get("reasks", {}).get("throughput_ratio"),
        "llm_stage_ratio_with_reasks": l_.get("stage", {}).get("throughput_ratio"),
        "offline_per_step_ratio": o.get("ratio"),
        "dedup_memory_ratio": results.get("dedup", {}).get("memory_ratio"),
        "pool_index_memory_ratio": results.get("pool-index", {}).get("memory_ratio"),
        "scale_time_per_run_ratio": sc.get("time_ratio"),
        "scale_peak_rss_ratio": sc.get("rss_ratio"),
        "scale_largest_peak_rss_mib": threads[-1]["peak_rss_mib"] if threads else None,
        "scale_dask_identical": sd.get("dask_identical"),
        "scale_dask_flow_rss_ratio": sd.get("dask_flow_rss_ratio"),
        "scale_by_size": by_size,
        "dask_identical": dk.get("identical"),
        "resume_ok": results.get("resume", {}).get("ok"),
        "small_rows": {k: small[-1].get(k) for k in ("runs", "wall_s", "peak_rss_mib", "per_run_ms")}
        if small
        else None,
    }


RESULTS = HERE / "results.json"


def write_results(results: dict[str, dict], target: Path = RESULTS) -> Path:
    """`bench/results.json` (atomically): every benchmark's figures, the acceptance figures, the table."""
    blob = {"results": results, "acceptance": acceptance(results), "table": rows(results)}
    fd, tmp = tempfile.mkstemp(prefix=".results.json.", suffix=".tmp", dir=target.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(blob, indent=2) + "\n")
    os.replace(tmp, target)
    return target


def previous_results(target: Path = RESULTS) -> dict[str, dict]:
    """The benchmarks of the last `results.json` (kept for those this run does not redo)."""
    try:
        return dict(json.loads(target.read_text())["results"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [name for name, _ in BENCHES]
    parser.add_argument(
        "--only",
        nargs="+",
        choices=names,
        help="run these benchmarks only; the others' figures are kept from the last results.json",
    )
    args = parser.parse_args()
    # the benchmarks that run flows start Prefect's temporary server: give it time on a busy machine
    # (its 20 s default timed the LLM benchmark out while another build shared the two cores)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    chosen = args.only or names
    results: dict[str, dict] = previous_results() if args.only else {}
    failures = []
    target = RESULTS
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-") as tmp:
        for name, argv in BENCHES:
            if name not in chosen:
                continue
            print(f"== {name}", flush=True)
            data, code, seconds = _run(name, argv, Path(tmp))
            results[name] = {**data, "exit_code": code, "wall_s": round(seconds, 1)}
            if code != 0:
                failures.append(name)
            target = write_results(results)  # after each benchmark: a stopped run keeps what it measured
    table = rows(results)
    width = max(len(r[0]) for r in table) if table else 20
    print("\n" + f"{'figure':<{width}}  {'value':>22}  {'goal':<18} met")
    for figure, value, goal, met in table:
        mark = "" if met is None else ("yes" if met else "NO")
        print(f"{figure:<{width}}  {value:>22}  {goal:<18} {mark}")
    print(
        f"\nwritten: {target}"
        + (f"; benchmarks that missed a goal: {', '.join(failures)}" if failures else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
