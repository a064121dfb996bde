"""Explicit cache keys for the build's shard tasks (resume and warm rebuilds).

A key is a hash of what determines a shard's output: the input content (file sizes and
modification times for raw files, the serialised objects for later stages), the versions of
the components that process it (every reader, the extractor, the generator and its settings),
the options and the seed. Task source code is not part of a key: a change in behaviour must
bump the component's `version`, which invalidates exactly the shards it touches.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from extractors.base import ExtractOptions
from extractors.discovery import discover_readers
from extractors.ingest.bundles import detect_bundle
from generators.base import DistractorGenerator, PoolEntry
from generators.hygiene.secrets import SCANNER_VERSION
from generators.quality.adversarial import VERSION as FILTER_VERSION
from schemas import GoldStep, Trajectory, content_id
from schemas.tasks import find_spec

#: Bump when the shape of cached shard results changes in a way no component version covers.
#: 2: read shards are cached redacted (with their redaction counts). 3: a read shard's result is a
#: `build_stages.ScrubbedRead` class, no longer a NamedTuple.
CACHE_FORMAT = 3


def _package_version() -> str:
    try:
        return version("aptforge")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0"


def _stat(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1)
    return (path, st.st_size, st.st_mtime_ns)


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def read_key(files: Sequence[Sequence[Any]], privacy: Any = None) -> str:
    """Key of a read shard: every input file's (path, size, mtime), run-folder members included,
    the readers' versions and, since shards are cached redacted, the privacy options and the
    secret scanner's version."""
    stats = []
    for file, forced, *rest in files:
        members = [str(file)]
        bundle = detect_bundle(str(file))
        if bundle is not None:
            members += sorted(str(p) for p in bundle.members.values())
        stats.append((forced, rest[0] if rest else None, [_stat(m) for m in members]))
    readers = {name: cls.version for name, cls in discover_readers().items()}
    scrub = [SCANNER_VERSION, privacy.model_dump(mode="json") if privacy is not None else None]
    return content_id("read", CACHE_FORMAT, _package_version(), readers, stats, scrub)


def trajectory_hash(traj: Trajectory) -> str:
    """Content hash of one normalised trajectory."""
    return hashlib.sha256(traj.model_dump_json().encode("utf-8")).hexdigest()[:32]


def trajectories_key(trajs: Iterable[Trajectory]) -> str:
    """Key of a set of trajectories (order-free)."""
    return _digest(sorted(trajectory_hash(t) for t in trajs))


def extract_key(
    extractor_cls: Any,
    trajs: Sequence[Trajectory],
    options: Mapping[str, ExtractOptions],
    observed_key: str = "",
) -> str:
    """Key of an extract shard: extractor name and version, options, shard content, what it observed."""
    opts = {name: list(o) for name, o in sorted(options.items())}
    return content_id(
        "extract",
        CACHE_FORMAT,
        extractor_cls.name,
        extractor_cls.version,
        opts,
        [trajectory_hash(t) for t in trajs],
        observed_key,
    )


def pool_key(pool: Iterable[PoolEntry]) -> str:
    """Key of a task's distractor pool (read once, in order)."""
    return _digest(
        f"{e.step_id}\x1f{e.trajectory_id}\x1f{e.group}\x1f{e.text}\x1f{e.retrievable}" for e in pool
    )


def generate_key(
    config: Any, generator: DistractorGenerator, golds: Sequence[GoldStep], pool: str, n_options: int
) -> str:
    """Key of a generate shard, or "" (no caching) for generators whose output is not a pure function.

    Only the offline generator is cached here: LLM generators keep their own response cache
    (a rerun pays nothing), and a shard with a transient failure must be retried, not replayed.
    """
    if generator.name != "offline":
        return ""
    return content_id(
        "generate",
        CACHE_FORMAT,
        generator.name,
        generator.version,
        config.generator.model_dump(mode="json"),
        config.seed,
        n_options,
        [hashlib.sha256(g.model_dump_json().encode("utf-8")).hexdigest() for g in golds],
        pool,
    )


def filter_key(scenario: str, task: str, seed: int, settings: Any, bounds: Any, content: str) -> str:
    """Key of an adversarial filter block: the filter's version, its settings, the bounds it aims
    under, the seed, the task's spec (which fields are the context the scorers read), and `content`,
    the digest of the block's questions with the places they were posed at
    (`flows.filtering._deal`): the same questions at other places make another output."""
    spec = find_spec(scenario, task)
    return content_id(
        "filter",
        CACHE_FORMAT,
        FILTER_VERSION,
        scenario,
        task,
        spec.model_dump(mode="json") if spec is not None else None,
        seed,
        settings._asdict(),
        {**bounds._asdict(), "fixed": dict(bounds.fixed)},  # every field, a field added later too
        content,
    )


def build_key(config: Any, extractor_cls: Any, read_keys: Sequence[str]) -> str:
    """Key of a whole build: config, extractor, generator settings, every input shard and every report file."""
    from extractors.ingest.records import find_inputs

    reports = [_stat(str(p)) for p in find_inputs(config.report_paths())]
    return content_id(
        "build",
        CACHE_FORMAT,
        _package_version(),
        config.fingerprint(),
        extractor_cls.name,
        extractor_cls.version,
        list(read_keys),
        reports,
    )
