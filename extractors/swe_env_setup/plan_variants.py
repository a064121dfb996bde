"""Clean env-setup plan golds, and wrong plans of several kinds (helpers of the `plan` task).

A gold plan is the run's effective setup, cleaned as APTBench's plans read: a script run that is
run again later is kept only at its last run (the earlier ones were attempts), then consecutive
edits of one file become one step. A wrong plan is the gold with two wrong moves: one shared by
every option of the item (the anchor) and one of its own, of several kinds, drawn from:

- `omit`: a required step (by the run's evidence) left out;
- `reorder`: a required step moved after the step that needs it;
- `wrong_entry`: the final run pointed at another script of the repository (from its file tree);
- `wrong_package`: an install step with one package pinned to an old version, or dropped;
- `foreign_step`: an install step swapped for an install step of another repository's plan.

Substitutions keep the gold's first and last step kinds and its length, omissions and moves keep
its vocabulary, so neither "clone first / run last", length nor a harmful word separates the gold.
Every option is checked wrong: a move or omission against the run's evidence (`plan.is_wrong`), a
substitution because the plan then runs or installs something the run did not.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from extractors.swe_env_setup.plan import MAX_SIMILARITY, is_wrong, similarity
from extractors.swe_env_setup.steps import PlanStep, render_plan

_SCRIPT = re.compile(r"[\w./-]+\.(?:py|sh)\b")


def clean_plan(plan: Sequence[PlanStep]) -> list[PlanStep]:
    """The gold plan: a run kept only at its last occurrence, then consecutive edits of one file merged."""
    last_run = {s.text: k for k, s in enumerate(plan) if s.category in {"run", "test"}}
    kept = [s for k, s in enumerate(plan) if s.category not in {"run", "test"} or last_run[s.text] == k]
    out: list[PlanStep] = []
    for s in kept:
        if out and s.category == "edit" and out[-1].category == "edit" and out[-1].text == s.text:
            out[-1] = out[-1]._replace(steps=out[-1].steps + s.steps)
        else:
            out.append(s)
    return out


def remap_required(
    plan: Sequence[PlanStep], cleaned: Sequence[PlanStep], required: dict[int, int]
) -> dict[int, int]:
    """`required` (indices of `plan`) in indices of `cleaned` (by the run steps each stands for)."""
    where = {i: k for k, s in enumerate(cleaned) for i in s.steps}

    def find(k: int) -> int | None:
        return next((where[i] for i in plan[k].steps if i in where), None)

    out: dict[int, int] = {}
    for k, user in required.items():
        a, b = find(k), find(user)
        if a is not None:
            out[a] = b if b is not None else len(cleaned) - 1
    return out


def _scripts(text: str, repo_dir: str) -> list[str]:
    found = [m.group(0) for m in _SCRIPT.finditer(text)]
    return [
        f if not repo_dir or f.startswith(repo_dir + "/") else f"{repo_dir}/{f}" for f in dict.fromkeys(found)
    ]


def substitutions(
    plan: Sequence[PlanStep], files_text: str, repo_dir: str, foreign: Sequence[PlanStep], rng: random.Random
) -> list[tuple[str, int, PlanStep]]:
    """`(kind, index, replacement)` for the substitution kinds (see the module docstring)."""
    out: list[tuple[str, int, PlanStep]] = []
    runs = [k for k, s in enumerate(plan) if s.category in {"run", "test"}]
    if runs:
        k = runs[-1]
        used = set(_SCRIPT.findall(plan[k].text))
        others = [
            f
            for f in _scripts(files_text, repo_dir)
            if f.rsplit("/", 1)[-1] not in {u.rsplit("/", 1)[-1] for u in used}
        ]
        rng.shuffle(others)
        for f in others[:3]:
            text = _SCRIPT.sub(f, plan[k].text, count=1)
            if text != plan[k].text:
                out.append(("wrong_entry", k, plan[k]._replace(text=text)))
    for k, s in enumerate(plan):
        if s.category != "install" or not s.packages:
            continue
        p = s.packages[rng.randrange(len(s.packages))]
        name = re.split(r"[=<>!~]", p)[0]
        out.append(("wrong_package", k, s._replace(text=s.text.replace(p, f"{name}==0.1.0", 1))))
        if len(s.packages) > 1:
            rest = [x for x in s.packages if x != p]
            out.append(
                ("wrong_package", k, s._replace(text=s.text.replace(", ".join(s.packages), ", ".join(rest))))
            )
    installs = [k for k, s in enumerate(plan) if s.category in {"install", "deps"}]
    own = {s.text for s in plan}
    alien = [f for f in dict.fromkeys(foreign) if f.category == "install" and f.text not in own]
    rng.shuffle(alien)
    for k in installs[:2]:
        for f in alien[:2]:
            out.append(("foreign_step", k, f))
    return out


def wrong_plans(
    plan: Sequence[PlanStep],
    required: dict[int, int],
    files_text: str,
    repo_dir: str,
    foreign: Sequence[PlanStep],
    rng: random.Random,
    limit: int = 24,
) -> list[tuple[str, str]]:
    """`(kinds, option text)` wrong plans, two moves of different kinds each (see the module docstring)."""
    gold = render_plan(list(plan), star=True)
    n = len(plan)
    moves: list[tuple[str, list[int | PlanStep]]] = []
    for k, user in sorted(required.items()):
        if 0 < k < n - 1:
            moves.append(("omit", [j for j in range(n) if j != k]))
        if user > k and k > 0 and user < n:
            order = [j for j in range(n) if j != k]
            at = order.index(user) + 1
            moves.append(("reorder", [*order[:at], k, *order[at:]]))
    for kind, k, step in substitutions(plan, files_text, repo_dir, foreign, rng):
        moves.append((kind, [step if j == k else j for j in range(n)]))
    rng.shuffle(moves)
    # one shared wrong move (the anchor) plus one own move each: the gold is then as far from every
    # option as the options are from each other (two own moves each would make it the medoid)
    best: list[tuple[str, str]] = []
    for anchor in range(len(moves)):
        ka, va = moves[anchor]
        picked: list[tuple[str, str]] = []
        texts: list[str] = [gold]
        for b in range(len(moves)):
            kb, vb = moves[b]
            if b == anchor:
                continue
            variant = _combine(va, vb, n)
            if variant is None:
                continue
            ints = [x for x in variant if isinstance(x, int)]
            subst = any(not isinstance(x, int) for x in variant)
            if not subst and not is_wrong(ints, required):
                continue
            text = render_plan([plan[x] if isinstance(x, int) else x for x in variant], star=True)
            if text not in texts and similarity(text, gold, MAX_SIMILARITY) < MAX_SIMILARITY:
                picked.append((f"{ka}+{kb}", text))
                texts.append(text)
        kinds = {k.split("+")[1] for k, _ in picked}
        if len(picked) >= 6 and len(kinds) >= 2:
            return picked[:limit]
        if len(picked) > len(best):
            best = picked
    return best[:limit]


def _combine(a: list[int | PlanStep], b: list[int | PlanStep], n: int) -> list[int | PlanStep] | None:
    """Both moves applied (an omission applied to a reorder; substitutions by index); None for two reorders."""
    subs = {j: x for v in (a, b) for j, x in enumerate(v) if not isinstance(x, int)}
    orders = [v for v in (a, b) if all(isinstance(x, int) for x in v)]
    omits = [v for v in orders if len(v) < n]
    reorders = [v for v in orders if len(v) == n]
    if len(reorders) == 2 or len(omits) == 2:
        return None
    base: list[int] = [int(x) for x in reorders[0]] if reorders else list(range(n))
    if omits:
        keep = {int(x) for x in omits[0]}
        base = [x for x in base if x in keep]
    return [subs.get(x, x) for x in base]
