"""The dataset card of a release, rendered with huggingface_hub's `DatasetCard` / `DatasetCardData`.

Standard metadata (licence, languages, creators, size and task categories, source datasets, `configs`
with the `test` and `fewshot` splits) and the sections a user needs: summary, configs with counts,
data fields, how to load, how it was built (sources with their licences, success signals, extractors,
generators, review), model-free baselines per published config on the published rows, limitations,
citation and changelog. `check_card` is the offline metadata check (the Hub's own validation needs
the network). Pure: the same inputs render the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, NamedTuple

from generators.quality.baselines import Mcq, task_baselines
from schemas.provenance import Provenance
from schemas.questions import Question
from schemas.rows import META_FIELDS

_TEMPLATE = "dataset_card.md"
"""The card's Jinja layout, beside this module."""
_OWN_COLUMNS = {
    "content_hash": "Hash of the rendered row fields, choices and answer: what the reviewer accepted.",
    "status": "Review status (`accepted` or `edited`).",
    "distractor_origins": "Where each distractor came from (e.g. a failed run of the same instance).",
    "source_file": "Raw file of the run, relative to its input root (`<root name>/<path>`).",
}
#: Hub task categories of the item forms.
_TASK_CATEGORIES = {"mcq": "multiple-choice", "completion": "text-generation"}
_SIZE_STEPS = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


class CardSource(NamedTuple):
    """One input source as the card names it."""

    name: str
    """Input root name (the last part of the configured path)."""
    license: str
    """Licence of the raw trajectories, as the config states it."""


class CardConfig(NamedTuple):
    """One published config as the card describes it."""

    name: str
    dataset: str
    folder: str
    form: str
    n_options: int
    fields: Sequence[tuple[str, str, bool]]
    """APTBench fields: (name, type, carries the gold)."""
    test: Sequence[Mapping[str, Any]]
    fewshot: Sequence[Mapping[str, Any]]


def _size_category(n: int) -> str:
    return next((label for limit, label in _SIZE_STEPS if n < limit), "n>1M")


def _fmt(counter: Counter[str]) -> str:
    return ", ".join(f"{k} ({v})" for k, v in sorted(counter.items())) or "none"


def _pct(value: float) -> str:
    return f"{value:.0%}"


def config_baselines(config: CardConfig) -> dict[str, Any] | None:
    """Model-free baselines of one MCQ config on its published test rows (None for completion configs)."""
    if config.form != "mcq" or not config.test:
        return None
    items = [Mcq(str(r["item_id"]), tuple(r["options"]), int(r["gold_index"])) for r in config.test]
    result = task_baselines(items)
    letters = Counter("ABCDEFGHIJ"[r["gold_index"]] for r in config.test)
    positions = " ".join(f"{k}:{v}" for k, v in sorted(letters.items()))
    row = {"name": config.name, "n": result.n_items, "chance": _pct(result.chance)}
    row.update({k: _pct(result.accuracy[k]) for k in ("longest", "shortest", "central", "no_context")})
    # the leave-one-out "most frequent position" baseline is 0 by construction when positions are
    # balanced, so the card shows the positions and their chi-square p-value instead
    row["positions"] = f"{positions} (p={result.position_test.p_value:.2f})"
    return row


def _meta_fields() -> list[dict[str, str]]:
    docs = {n: f.description or "" for n, f in Question.model_fields.items()}
    docs.update({n: f.description or "" for n, f in Provenance.model_fields.items()})
    docs.update(_OWN_COLUMNS)
    return [{"name": f.name, "type": str(f.type), "doc": docs.get(f.name, "")} for f in META_FIELDS]


def card_data(configs: Sequence[CardConfig], license: str, languages: Sequence[str], pretty_name: str) -> Any:
    """The card's YAML metadata as a `DatasetCardData`."""
    from huggingface_hub import DatasetCardData

    total = sum(len(c.test) + len(c.fewshot) for c in configs)
    return DatasetCardData(
        pretty_name=pretty_name,
        license=license,
        language=list(languages),
        multilinguality="multilingual" if len(languages) > 1 else "monolingual",
        annotations_creators=["expert-generated", "machine-generated"],
        language_creators=["machine-generated"],
        size_categories=[_size_category(total)],
        source_datasets=["original"],
        task_categories=sorted({_TASK_CATEGORIES[c.form] for c in configs}),
        tags=["agents", "benchmark", "aptbench", "aptforge", "base-models"],
        configs=[
            {
                "config_name": c.name,
                "data_files": [
                    {"split": split, "path": f"data/{c.name}/{split}-*.parquet"}
                    for split, rows in (("test", c.test), ("fewshot", c.fewshot))
                    if rows
                ],
            }
            for c in configs
        ],
    )


def render_card(
    configs: Sequence[CardConfig],
    *,
    meta: Any,
    sources: Sequence[CardSource],
    changes: Mapping[str, Mapping[str, int]],
    excluded: Mapping[str, int] | None = None,
) -> str:
    """The README.md of a release (`meta` is the release's `ReleaseMeta`)."""
    from huggingface_hub import DatasetCard

    rows = [r for c in configs for r in (*c.test, *c.fewshot)]
    languages = sorted({"zh" if c.name.endswith("_zh") else "en" for c in configs}) or ["en"]
    title = f"{meta.name.replace('-', ' ').replace('_', ' ')} benchmark {meta.version}"
    data = card_data(configs, meta.license, languages, title)
    by_root: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_root.setdefault(str(r["source_file"]).split("/", 1)[0], []).append(r)
    source_rows = []
    for s in sources:
        mine = by_root.get(s.name, [])
        source_rows.append(
            {
                "name": s.name,
                "license": s.license,
                "formats": _fmt(Counter(r["source_format"] for r in mine)),
                "agents": _fmt(
                    Counter(f"{r['agent']} / {r['agent_model'] or 'unknown model'}" for r in mine)
                ),
            }
        )
    gens = Counter(
        f"{r['generator']}@{r['generator_version']}" + (f" ({r['model']})" if r["model"] else "")
        for r in rows
        if r["generator"]
    )
    reviewed = Counter(str(r["status"]) for r in rows)
    target = meta.repo_id or "path/to/release"
    first = configs[0].name if configs else "<config>"
    command = (
        f"lm_eval --model hf --model_args pretrained=<base model> --include_path lm_eval "
        f"--tasks aptforge_{first}_aptbench,aptforge_{first}_loglik"
    )
    if not meta.repo_id:
        command = "cd <release folder>  # the YAMLs read data/ relative to it\n" + command
    context = {
        "title": title,
        "version": meta.version,
        "description": meta.description or "Agentic-potential benchmark built with aptforge.",
        "configs": [
            {
                "name": c.name,
                "dataset": c.dataset,
                "folder": c.folder,
                "form": c.form,
                "options": c.n_options or "-",
                "test": len(c.test),
                "fewshot": len(c.fewshot),
                "chance": _pct(1 / c.n_options) if c.form == "mcq" and c.n_options else "-",
                "fields": [{"name": n, "type": t, "answer": a} for n, t, a in c.fields],
            }
            for c in configs
        ],
        "meta_fields": _meta_fields(),
        "load_path": target,
        "revision": f', revision="{meta.version}"' if meta.repo_id else "",
        "lm_eval_command": command,
        "sources": source_rows,
        "signals": _fmt(Counter(r["outcome_signal"] or "unknown" for r in rows)),
        "extractors": _fmt(Counter(f"{r['extractor']}@{r['extractor_version']}" for r in rows)),
        "generators": _fmt(gens) if gens else "none (completion tasks only)",
        "review": f"{len(rows)} items verified by human reviewers: {_fmt(reviewed)}",
        "excluded": _fmt(Counter(dict(excluded or {}))) if excluded else "",
        "baselines": [b for c in configs if (b := config_baselines(c)) is not None],
        "citation_key": "".join(ch if ch.isalnum() else "_" for ch in f"{meta.name}_{meta.version}"),
        "config_hash": meta.config_hash,
        "against": meta.previous.get("version") if meta.previous else "nothing (first release)",
        "changes": sorted(changes.items()),
    }
    template = resources.files("flows").joinpath(_TEMPLATE).read_text(encoding="utf-8")
    return str(DatasetCard.from_template(data, template_str=template, **context)).rstrip("\n") + "\n"


def check_card(text: str, sources: Sequence[CardSource] = ()) -> list[str]:
    """The offline metadata check: problems of a card's YAML against the Hub's vocabularies (empty = fine).

    Parses the card with `DatasetCard` (metadata errors raise), checks `configs` with `datasets`'
    own validator, and the creators, size, multilinguality and language values against the lists
    `datasets` ships; every source's licence must be named in the card.
    """
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    card = DatasetCard(text, ignore_metadata_errors=False)
    data: DatasetCardData = card.data
    vocab = resources.files("datasets.utils") / "resources"
    creators = json.loads((vocab / "creators.json").read_text(encoding="utf-8"))
    sizes = set(json.loads((vocab / "size_categories.json").read_text(encoding="utf-8")))
    multi = set(json.loads((vocab / "multilingualities.json").read_text(encoding="utf-8")))
    languages = set(json.loads((vocab / "languages.json").read_text(encoding="utf-8")))
    problems: list[str] = []

    def each(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [] if value is None else [value]

    required = ("license", "language", "pretty_name", "size_categories", "task_categories", "configs")
    problems += [f"metadata `{k}` is missing" for k in required if not getattr(data, k, None)]
    problems += [
        f"annotations_creators: {v!r}"
        for v in each(data.annotations_creators)
        if v not in creators["annotations"]
    ]
    problems += [
        f"language_creators: {v!r}" for v in each(data.language_creators) if v not in creators["language"]
    ]
    problems += [f"size_categories: {v!r}" for v in each(data.size_categories) if v not in sizes]
    problems += [f"multilinguality: {v!r}" for v in each(data.multilinguality) if v not in multi]
    problems += [f"language: {v!r}" for v in each(data.language) if v not in languages]
    try:
        MetadataConfigs.from_dataset_card_data(data)  # validates each config's name and data_files
    except ValueError as exc:
        problems.append(f"configs: {exc}")
    body = card.text
    problems += [
        f"source {s.name!r}: licence {s.license!r} not named" for s in sources if s.license not in body
    ]
    return problems
