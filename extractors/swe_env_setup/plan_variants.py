"""Clean env-setup plan golds, and a pool of wrong plans of several kinds (helpers of the `plan` task).

A gold plan is the run's effective setup, cleaned as APTBench's plans read: a script run that is
run again later is kept only at its last run (the earlier ones were attempts), then consecutive
edits of one file become one step.

A wrong plan is the gold with one *anchor* edit that makes it wrong (shared by a family of
options, so the gold is as far from each option as the options are from each other and is never
their medoid) plus one or two *own* edits, of these kinds:

- `omit`: a required step (by the run's evidence) left out (one step fewer);
- `reorder`: a required step moved after a later, non-final step that needs it;
- `late`: a required step moved after the final run (the plan then ends on it);
- `wrong_entry`: a run pointed at another script the repository shows (README, docs, file listing);
- `wrong_edit`: an edit made to another file the repository shows instead of the one that needed it;
- `wrong_deps`: the requirements installed from another requirements file the repository shows;
- `wrong_package`: a package of an install dropped, or its version pin changed or removed;
- `foreign_step`: an install swapped for an install step of another repository's plan (the ones
  sharing a package with this repository's own texts first: the same framework);
- `extra`: a step added (an install from another repository's plan, an edit of another shown
  file) before the final run: never wrong by itself, it only sits beside an anchor, so the gold
  is not always the option with the most steps.

Which kinds exist for a plan depends on its steps; a family takes every own edit its anchor
allows, so a plan yields many more options than an item shows (the adversarial filter chooses).
Families whose anchor keeps the plan's shape (first step, last step kind, step count) come
first: the clone stays first and the final run last, so no rule on step order or position
separates the gold. Each option is checked wrong: a substitution or omission of a required step,
or a move of one after the step that needs it (`plan.is_wrong`), a final run of another script.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from extractors.swe_env_setup.errors import norm_name
from extractors.swe_env_setup.plan import is_wrong, similarity
from extractors.swe_env_setup.steps import PlanStep, render_plan

_SCRIPT = re.compile(r"[\w./-]+\.(?:py|sh)\b")
_FILE = re.compile(r"[\w./-]+\.(?:py|sh|ya?ml|cfg|json|txt|toml|ini)\b")
_REQS = re.compile(
    r"[\w./-]*requirements[\w.-]*\.txt\b|[\w./-]*(?:environment\.ya?ml|pyproject\.toml|setup\.py)\b"
)
_NOT_ENTRIES = {"setup.py", "__init__.py", "conftest.py", "setup.cfg", "pyproject.toml", "package.json"}
_PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)\s*(==|>=|<=|~=|<|>)\s*([\w.*+-]+)$")

#: A wrong plan more similar than this to the gold (normalised difflib ratio) is too close to tell apart
#: (the near-gold gate refuses 0.9).
MAX_SIMILARITY = 0.89
#: Families (anchors) tried per plan, and candidates kept.
MAX_ANCHORS = 6
MAX_CANDIDATES = 40
#: Options of the first family that lead the list (the offline generator picks the shown ones among them).
HEAD = 10
#: Kinds that keep the plan's first step, final step kind and step count.
SHAPE_KEEPING = ("foreign_step", "wrong_deps", "wrong_edit", "wrong_entry", "wrong_package")
"""In the order they are tried as anchors: a whole step replaced first (an anchor that changes a word
leaves too few own edits far enough from the gold)."""


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


class PlanEdit(NamedTuple):
    """One change of a gold plan."""

    kind: str
    at: int
    """The plan step changed (omitted, moved, replaced) or the step an `extra` goes before."""
    step: PlanStep | None = None
    """The replacement (`wrong_*`, `foreign_step`) or the added step (`extra`)."""
    after: int = -1
    """Where a moved step goes (`reorder`, `late`): right after this plan step."""
    wrong: bool = True
    """Whether this edit alone makes the plan wrong."""


def _in_repo(path: str, repo_dir: str) -> str:
    path = re.sub(r"^(?:/content/|\./)", "", path)
    if not repo_dir or path.startswith(repo_dir + "/"):
        return path
    return f"{repo_dir}/{path}"


def _names(text: str, pattern: re.Pattern[str], repo_dir: str) -> list[str]:
    return list(dict.fromkeys(_in_repo(m.group(0), repo_dir) for m in pattern.finditer(text)))


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _final_run(plan: Sequence[PlanStep]) -> int:
    """The plan's final run (its last step when that is a run or test), else -1."""
    return len(plan) - 1 if plan and plan[-1].category in {"run", "test"} else -1


def _swap_path(step: PlanStep, old: str, new: str, repo_dir: str) -> PlanStep | None:
    """`step` with its path `old` replaced by `new`, written as the gold writes paths (with or without the
    repository folder)."""
    for m in _FILE.finditer(step.text):
        if m.group(0) == old:
            shown = new if m.group(0).startswith(repo_dir + "/") else new.removeprefix(repo_dir + "/")
            return step._replace(text=step.text[: m.start()] + shown + step.text[m.end() :])
    return None


#: Packages that others install as hard requirements (their published install metadata): dropping
#: one from an install while a package that requires it is installed leaves a plan that still works,
#: so it is no wrong plan ("all the dependencies but numpy" beside faiss and pandas).
_REQUIRED_BY: dict[str, frozenset[str]] = {
    name: frozenset(carriers.split())
    for name, carriers in {
        "numpy": "pandas scipy scikit-learn matplotlib opencv-python opencv-python-headless faiss-cpu "
        "faiss-gpu torchvision transformers datasets accelerate h5py numba tensorflow jax seaborn "
        "statsmodels scikit-image evaluate gensim librosa",
        "scipy": "scikit-learn statsmodels scikit-image gensim librosa",
        "joblib": "scikit-learn nltk librosa",
        "threadpoolctl": "scikit-learn",
        "filelock": "torch transformers datasets huggingface-hub",
        "pandas": "datasets seaborn statsmodels evaluate",
        "tqdm": "transformers datasets nltk huggingface-hub evaluate",
        "requests": "transformers datasets huggingface-hub",
        "pyyaml": "transformers accelerate huggingface-hub",
        "packaging": "transformers accelerate huggingface-hub matplotlib",
        "regex": "transformers nltk",
        "tokenizers": "transformers",
        "safetensors": "transformers accelerate",
        "huggingface-hub": "transformers datasets accelerate tokenizers evaluate",
        "torch": "accelerate torchvision torchaudio",
        "einops": "einops-exts",
        "pillow": "matplotlib torchvision scikit-image",
        "pyarrow": "datasets",
        "typing-extensions": "torch",
        "sympy": "torch",
        "networkx": "torch scikit-image",
        "jinja2": "torch",
        "fsspec": "torch datasets huggingface-hub",
    }.items()
}


def _bare(package: str) -> str:
    """A requirement's distribution name, normalised (`transformers[torch]>=4` -> `transformers`)."""
    return norm_name(re.split(r"[\[=<>!~ ;]", package.strip(), maxsplit=1)[0])


def carried(package: str, installed: Iterable[str]) -> bool:
    """Whether another of the `installed` requirements installs `package` as a hard requirement."""
    carriers = _REQUIRED_BY.get(_bare(package), frozenset())
    return any(_bare(p) in carriers for p in installed)


def _package_edits(
    k: int,
    s: PlanStep,
    versions: dict[str, list[str]],
    required: bool,
    rng: random.Random,
    installed: Sequence[str] = (),
) -> list[PlanEdit]:
    """Wrong package edits of install step `k`: a package dropped (wrong where the step is required
    and no other of the plan's `installed` packages requires it), a pin changed."""
    out: list[PlanEdit] = []
    pkgs = list(s.packages)
    listed = ", ".join(pkgs)
    if listed not in s.text:
        return out

    def with_packages(new: list[str]) -> PlanStep:
        text = s.text.replace(listed, ", ".join(new), 1)
        text = re.sub(r"\bpackages? (?=\S)", "packages " if len(new) > 1 else "package ", text, count=1)
        return s._replace(text=text, packages=tuple(new))

    order = list(range(len(pkgs)))
    rng.shuffle(order)
    for i in order[:3]:
        p = pkgs[i]
        m = _PIN.match(p)
        name = m.group(1) if m else p
        if len(pkgs) > 1:
            rest = [*pkgs[:i], *pkgs[i + 1 :]]
            wrong = required and not carried(p, [q for q in installed if q != p])
            out.append(PlanEdit("wrong_package", k, with_packages(rest), wrong=wrong))
        if m and m.group(2) == "==":  # the run pinned it: another version, or none, is the wrong one
            others = [v for v in versions.get(name.lower(), []) if v != m.group(3)]
            new = [f"{name}=={others[0]}"] if others else []
            new.append(name)
            for n in new[:1]:
                out.append(PlanEdit("wrong_package", k, with_packages([*pkgs[:i], n, *pkgs[i + 1 :]])))
        elif not m:
            seen = versions.get(name.lower(), [])
            if seen:  # a version another run pinned, so not a made-up number
                pinned = f"{name}=={rng.choice(seen)}"
                out.append(
                    PlanEdit(
                        "wrong_package", k, with_packages([*pkgs[:i], pinned, *pkgs[i + 1 :]]), wrong=False
                    )
                )
    return out


def _order_edits(plan: Sequence[PlanStep], required: dict[int, int]) -> list[PlanEdit]:
    """`omit`, `reorder` and `late` of the required inner steps (never the clone, a `cd` or the final run)."""
    n = len(plan)
    out: list[PlanEdit] = []
    for k, user in sorted(required.items()):
        if not 0 < k < n - 1 or plan[k].category == "cd":
            continue
        out.append(PlanEdit("omit", k))
        if k < user < n - 1:
            out.append(PlanEdit("reorder", k, after=user))
        elif user == n - 1 and k < user:
            out.append(PlanEdit("late", k, after=user))
    return out


def _others(names: list[str], path: str, used: set[str]) -> list[str]:
    """Shown files of `path`'s type that the plan never names (never a setup or package file)."""
    ext = "." + path.rsplit(".", 1)[-1]
    return [f for f in names if _base(f) not in used | _NOT_ENTRIES and f.endswith(ext)]


def _path_edits(
    plan: Sequence[PlanStep], required: dict[int, int], files_text: str, repo_dir: str, rng: random.Random
) -> list[PlanEdit]:
    """`wrong_entry`, `wrong_edit` and `wrong_deps`: a path of the plan swapped for another one shown."""
    final = _final_run(plan)
    scripts = _names(files_text, _SCRIPT, repo_dir)
    files = [f for f in _names(files_text, _FILE, repo_dir) if not _REQS.fullmatch(_base(f))]
    reqs = _names(files_text, _REQS, repo_dir)
    used = {_base(m.group(0)) for s in plan for m in _FILE.finditer(s.text)}
    out: list[PlanEdit] = []
    for k, s in enumerate(plan):
        if s.category in {"run", "test"} and (mine := _SCRIPT.search(s.text)):
            kind, pool, wrong, count = "wrong_entry", _others(scripts, mine.group(0), used), k == final, 4
        elif s.category == "edit" and (mine := _FILE.search(s.text)):
            kind, pool, wrong, count = "wrong_edit", _others(files, mine.group(0), used), k in required, 3
        elif s.category == "deps" and (mine := _REQS.search(s.text)):
            pool = [f for f in reqs if _base(f) != _base(mine.group(0))]
            kind, wrong, count = "wrong_deps", k in required, 2
        else:
            continue
        rng.shuffle(pool)
        for f in pool[:count]:
            if (new := _swap_path(s, mine.group(0), f, repo_dir)) is not None:
                out.append(PlanEdit(kind, k, new, wrong=wrong))
    return out


def _alien_installs(
    plan: Sequence[PlanStep], foreign: Sequence[PlanStep], files_text: str, rng: random.Random
) -> list[PlanStep]:
    """Other repositories' install steps sharing no package with the plan, the same framework first
    (a package this repository's texts name)."""
    own_text = " ".join(s.text for s in plan)
    own_pkgs = {p.split("=")[0].lower() for s in plan for p in s.packages}
    alien = [
        f
        for f in dict.fromkeys(foreign)
        if f.category == "install"
        and f.text not in own_text
        and not own_pkgs & set(map(str.lower, f.packages))
    ]
    rng.shuffle(alien)
    low = files_text.lower()
    alien.sort(key=lambda f: not any(re.search(rf"\b{re.escape(p.lower())}\b", low) for p in f.packages))
    return alien


def plan_edits(
    plan: Sequence[PlanStep],
    required: dict[int, int],
    files_text: str,
    repo_dir: str,
    foreign: Sequence[PlanStep],
    rng: random.Random,
) -> list[PlanEdit]:
    """Every single edit of the kinds above that the plan and the repository's texts allow."""
    out = _order_edits(plan, required) + _path_edits(plan, required, files_text, repo_dir, rng)
    versions: dict[str, set[str]] = {}
    for f in foreign:
        for p in f.packages:
            if (m := _PIN.match(p)) and m.group(2) == "==":
                versions.setdefault(m.group(1).lower(), set()).add(m.group(3))
    seen = {a: sorted(v) for a, v in versions.items()}
    installed = [p for s in plan if s.category == "install" for p in s.packages]
    for k, s in enumerate(plan):
        if s.category == "install" and s.packages:
            out += _package_edits(k, s, seen, k in required, rng, installed)
    alien = _alien_installs(plan, foreign, files_text, rng)
    installs = sorted(
        (k for k, s in enumerate(plan) if s.category in {"install", "deps"}), key=lambda k: k not in required
    )
    out += [PlanEdit("foreign_step", k, f, wrong=k in required) for k in installs[:3] for f in alien[:3]]
    final = _final_run(plan)
    if final > 0:
        out += [PlanEdit("extra", final, f, wrong=False) for f in alien[3:5]]
        used = {_base(m.group(0)) for s in plan for m in _FILE.finditer(s.text)}
        shown = [
            f
            for f in _names(files_text, _FILE, repo_dir)
            if _base(f) not in used and f.endswith((".py", ".sh", ".yaml", ".cfg"))
        ]
        rng.shuffle(shown)
        out += [PlanEdit("extra", final, PlanStep(f"Edit {f}", "edit", ()), wrong=False) for f in shown[:2]]
    return out


def apply_edits(plan: Sequence[PlanStep], edits: Sequence[PlanEdit]) -> list[int | PlanStep] | None:
    """The plan with `edits` applied (original indices and new steps); None when two edits clash."""
    touched = [e.at for e in edits if e.kind != "extra"]
    if len(set(touched)) < len(touched):
        return None
    moves = [e for e in edits if e.kind in {"reorder", "late"}]
    if len(moves) > 1 or any(e.after in touched for e in moves):
        return None
    extras = [e for e in edits if e.kind == "extra"]
    gone = {e.at for e in edits if e.kind in {"omit", "reorder", "late"}}
    order: list[int] = [k for k in range(len(plan)) if k not in gone]
    for e in moves:
        order.insert(order.index(e.after) + 1, e.at)
    subs = {e.at: e.step for e in edits if e.step is not None and e.kind != "extra"}
    out: list[int | PlanStep] = []
    for k in order:
        out += [e.step for e in extras if e.at == k and e.step is not None]
        step = subs.get(k)
        out.append(step if step is not None else k)
    return out


def _shape(plan: Sequence[PlanStep], variant: Sequence[int | PlanStep]) -> tuple[int, str, str]:
    steps = [plan[x] if isinstance(x, int) else x for x in variant]
    return len(steps), steps[0].category, steps[-1].category


class WrongPlan(NamedTuple):
    """One checked-wrong plan option."""

    kinds: str
    """`anchor+own` kinds, e.g. `wrong_entry+omit`."""
    text: str
    foreign: bool
    """It holds a step of another repository's plan."""
    keeps_shape: bool = True
    """It starts and ends with the gold's kinds of step (the clone first, the final run last)."""


def _option(
    plan: Sequence[PlanStep],
    required: dict[int, int],
    applied: list[PlanEdit],
    gold: str,
    texts: set[str],
) -> tuple[str, list[int | PlanStep]] | None:
    """The text and steps of `applied` when they give a new checked-wrong option far enough from the gold."""
    variant = apply_edits(plan, applied)
    if variant is None:
        return None
    ints = [x for x in variant if isinstance(x, int)]
    if not any(e.step is not None and e.wrong for e in applied) and not is_wrong(ints, required):
        return None
    text = render_plan([plan[x] if isinstance(x, int) else x for x in variant], star=True)
    if text in texts or similarity(text, gold, MAX_SIMILARITY) >= MAX_SIMILARITY:
        return None
    return text, variant


def _family(
    plan: Sequence[PlanStep],
    required: dict[int, int],
    anchor: list[PlanEdit],
    edits: list[PlanEdit],
    texts: set[str],
    rng: random.Random,
) -> tuple[list[WrongPlan], list[WrongPlan]]:
    """The options of one anchor (one edit or two) with one own edit each (step counts alternating: the
    gold's, one fewer, one more), and those that break the gold's shape."""
    gold = render_plan(list(plan), star=True)
    shape = _shape(plan, list(range(len(plan))))
    groups: dict[int, list[WrongPlan]] = {-1: [], 0: [], 1: []}
    broken: list[WrongPlan] = []
    at = {a.at for a in anchor if a.kind != "extra"}
    own = [e for e in edits if e not in anchor and (e.kind == "extra" or e.at not in at)]
    rng.shuffle(own)
    for e in own:
        # a second own edit when one leaves the option too close to the gold (a word changed)
        seconds = [x for x in own if x.at != e.at and x is not e][:3]
        tries = ([*anchor, e] if s is None else [*anchor, e, s] for s in (None, *seconds))
        made = next(((a, r) for a in tries if (r := _option(plan, required, a, gold, texts))), None)
        if made is None:
            continue
        applied, (text, variant) = made
        texts.add(text)
        alien = any(
            x.kind == "foreign_step"
            or (x.kind == "extra" and x.step is not None and x.step.category == "install")
            for x in applied
        )
        found = WrongPlan("+".join(x.kind for x in applied), text, alien)
        count, first, last = _shape(plan, variant)
        if (first, last) != shape[1:]:
            broken.append(found._replace(keeps_shape=False))  # clone not first or no final run: a tell
        else:
            groups[max(-1, min(1, count - shape[0]))].append(found)
    return _interleave([groups[0], groups[-1], groups[1]]), broken


def _interleave(lists: list[list[WrongPlan]]) -> list[WrongPlan]:
    out: list[WrongPlan] = []
    for k in range(max(map(len, lists), default=0)):
        out += [x[k] for x in lists if k < len(x)]
    return out


def wrong_plans(
    plan: Sequence[PlanStep],
    required: dict[int, int],
    files_text: str,
    repo_dir: str,
    foreign: Sequence[PlanStep],
    rng: random.Random,
    limit: int = MAX_CANDIDATES,
) -> list[WrongPlan]:
    """Checked-wrong plans, family by family (see the module docstring), shape-keeping families first.

    The first family leads (the options shown come from one anchor: the gold is then no medoid), the
    others follow in turn, so the reserve holds options of every anchor; options that break the gold's
    shape come last.
    """
    gold = render_plan(list(plan), star=True)
    edits = plan_edits(plan, required, files_text, repo_dir, foreign, rng)
    anchors = [e for e in edits if e.wrong and e.kind != "extra"]
    rank = {k: i for i, k in enumerate((*SHAPE_KEEPING, "omit", "reorder", "late"))}
    rng.shuffle(anchors)
    anchors.sort(key=lambda e: rank[e.kind])
    picked: list[PlanEdit] = []
    for e in anchors:  # one anchor per kind and step: families then differ
        if all((a.kind, a.at) != (e.kind, e.at) for a in picked) and len(picked) < MAX_ANCHORS:
            picked.append(e)
    texts = {gold}
    families: list[list[WrongPlan]] = []
    broken: list[WrongPlan] = []
    big = [e for e in edits if e.kind in {"omit", "foreign_step", "extra"}]
    for anchor in picked:
        # the anchor alone, then with a second whole-step edit: options two edits from the gold and one
        # from each other, so the gold is neither the medoid nor the outlier of the options shown
        second = next((b for b in big if b.at != anchor.at and b is not anchor), None)
        members, bad = _family(plan, required, [anchor], edits, texts, rng)
        if second is not None:
            more, worse = _family(plan, required, [anchor, second], edits, texts, rng)
            members, bad = _interleave([members, more]), bad + worse
        families.append(members)
        broken += bad
        if sum(map(len, families)) >= limit:
            break
    head = families[0][:HEAD] if families else []
    rest = [f[HEAD:] if i == 0 else f for i, f in enumerate(families)]
    return [*head, *_interleave(rest), *broken][:limit]
