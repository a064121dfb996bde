"""Find readers and extractors by their tag: in this package, and in entry points.

`discover_*` are pure functions returning read-only mappings; a duplicate name fails loudly
and a lookup miss names the near misses. Flows pick components by name from config.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import yaml
from pydantic import ValidationError

from extractors.base import EXTRACTOR_TAG, READER_TAG
from schemas import AptbenchPrompt, TaskSpec, register_tasks


class DuplicateComponent(RuntimeError):
    """Two components share a name."""


class UnknownComponent(KeyError):
    """A name that matches no component; the message lists the close ones."""


class InvalidScenario(ValueError):
    """A scenario that lacks a piece (a task's spec or APTBench prompt, a well-named prompt file)."""


PROMPT_FILE = re.compile(
    r"^(?P<scenario>[A-Za-z0-9_-]+)\.(?P<task>[A-Za-z0-9_]+)\.v(?P<version>\d+)\.md\.j2$"
)
"""LLM prompt templates in a scenario's `prompts/` folder: `<scenario>.<task>.v<N>.md.j2`."""

APTBENCH_PROMPTS = "aptbench_prompts.yaml"
"""File beside a scenario's module: APTBench's protocol per task file (`<task>`, `<task>_en` ...)."""


def _modules(package: str, *, recurse: bool = False) -> list[ModuleType]:
    """The public modules and packages of `package` (names starting with `_` are helpers).

    A scenario may be one module or a package whose `__init__` holds the tagged class; readers may
    sit in sub-packages (`readers/envsetup/`), so `recurse` walks those too.
    """
    pkg = importlib.import_module(package)
    mods = []
    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{package}.{m.name}")
        mods.append(mod)
        if m.ispkg and recurse:
            mods += _modules(mod.__name__, recurse=True)
    return mods


def _defined_in(obj: type, mod: ModuleType) -> bool:
    """True for a class of `mod` itself or, when `mod` is a package, of one of its modules."""
    name = obj.__module__
    return name == mod.__name__ or (hasattr(mod, "__path__") and name.startswith(f"{mod.__name__}."))


def _collect(mods: list[ModuleType], tag: str) -> dict[str, type]:
    found: dict[str, type] = {}
    for mod in mods:
        for obj in vars(mod).values():
            if isinstance(obj, type) and obj.__dict__.get(tag) and _defined_in(obj, mod):
                other = found.setdefault(obj.name, obj)  # type: ignore[attr-defined]
                if other is not obj:
                    raise DuplicateComponent(
                        f"two components named {obj.name!r}: {other.__module__} and {obj.__module__}"  # type: ignore[attr-defined]
                    )
    return found


def _entry_point_modules(group: str) -> list[ModuleType]:
    mods = []
    for ep in entry_points(group=group):
        loaded = ep.load()
        mods.append(loaded if isinstance(loaded, ModuleType) else importlib.import_module(loaded.__module__))
    return mods


def discover_readers(
    package: str = "extractors.readers", group: str = "aptforge.readers"
) -> Mapping[str, Any]:
    """All readers, by name, ordered by sniffing priority."""
    found = _collect(_modules(package, recurse=True) + _entry_point_modules(group), READER_TAG)
    ordered = sorted(found.items(), key=lambda kv: (kv[1].priority, kv[0]))
    return MappingProxyType(dict(ordered))


def discover_extractors(package: str = "extractors", group: str = "aptforge.extractors") -> Mapping[str, Any]:
    """All scenario extractors, by name (== module or package name for in-tree ones).

    Every scenario is validated (each task has a TaskSpec with an APTBench prompt for each of its
    release folders, declared inline or in the package's `aptbench_prompts.yaml`; prompt files are
    named for the scenario's tasks) and its specs, prompts folded in, are registered for
    `schemas.task_spec`.

    Raises:
        InvalidScenario: a scenario lacks a piece; the message names the scenario and the task.
        DuplicateComponent: two scenarios share a name.
    """
    found = _collect(_modules(package) + _entry_point_modules(group), EXTRACTOR_TAG)
    specs = {name: scenario_specs(cls) for name, cls in found.items()}
    for name, declared in specs.items():
        register_tasks(name, declared)
    return MappingProxyType(found)


def prompt_dir(cls: type) -> Path | None:
    """The `prompts/` folder beside a scenario's module (its LLM prompt templates), if it has one."""
    folder = _module_dir(cls) / "prompts"
    return folder if folder.is_dir() else None


def _module_dir(cls: type) -> Path:
    return Path(sys.modules[cls.__module__].__file__ or "").parent


#: libyaml's safe loader where PyYAML was built with it (the same documents, a tenth of the time:
#: discovery runs in every build, generator and Dask worker), else the pure-Python one.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def package_prompts(cls: Any) -> dict[str, AptbenchPrompt]:
    """The APTBench protocols in the `aptbench_prompts.yaml` beside a scenario's module, by task file.

    Raises:
        InvalidScenario: the file is not YAML, or an entry is not a complete protocol (file, entry, reason).
    """
    path = _module_dir(cls) / APTBENCH_PROMPTS
    if not path.is_file():
        return {}
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER) or {}
    except yaml.YAMLError as exc:
        raise InvalidScenario(f"scenario {cls.name!r}: {path}: not YAML ({exc})") from None
    if not isinstance(data, Mapping):
        raise InvalidScenario(f"scenario {cls.name!r}: {path}: expected {{task file: protocol}}")
    out: dict[str, AptbenchPrompt] = {}
    for key, entry in data.items():
        try:
            out[str(key)] = AptbenchPrompt.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "entry"
            raise InvalidScenario(
                f"scenario {cls.name!r}: {path}: `{key}`: {where}: {err['msg']} "
                f"(a protocol has exactly {list(AptbenchPrompt.model_fields)})"
            ) from None
    return out


def scenario_specs(cls: Any) -> dict[str, TaskSpec]:
    """A scenario's TaskSpecs with its package's APTBench prompts folded in, after validating all of it.

    Fails loudly on a missing piece: a task without a TaskSpec, a release folder without an APTBench
    prompt, a prompt naming no task, a prompt declared twice differently, a stray LLM prompt file.

    Raises:
        InvalidScenario: naming the scenario, the task and the missing piece.
    """
    name = cls.name
    if not cls.tasks:
        raise InvalidScenario(f"scenario {name!r} ({cls.__module__}) declares no tasks")
    from_file = package_prompts(cls)
    specs: dict[str, TaskSpec] = {}
    for task in cls.tasks:
        spec = cls.specs.get(task)
        if not isinstance(spec, TaskSpec):
            raise InvalidScenario(
                f"scenario {name!r}, task {task!r}: no TaskSpec (pass tasks={{name: TaskSpec}})"
            )
        prompts = dict(spec.aptbench)
        for folder in spec.release_folders:
            filed = from_file.pop(folder, None)
            if filed is not None and prompts.setdefault(folder, filed) != filed:
                raise InvalidScenario(
                    f"scenario {name!r}, task {task!r}: APTBench prompt `{folder}` declared in the TaskSpec "
                    f"and differently in {APTBENCH_PROMPTS}"
                )
        missing = [f for f in spec.release_folders if f not in prompts]
        if missing:
            raise InvalidScenario(
                f"scenario {name!r}, task {task!r}: no APTBench (lm-eval) prompt for task file "
                f"{', '.join(f'`{f}`' for f in missing)} (declare it in TaskSpec.aptbench or in the "
                f"package's {APTBENCH_PROMPTS})"
            )
        specs[task] = spec.model_copy(update={"aptbench": prompts})
    if from_file:
        raise InvalidScenario(
            f"scenario {name!r}: {_module_dir(cls) / APTBENCH_PROMPTS} declares prompts for "
            f"{', '.join(sorted(from_file))}, which are no release folder of its tasks"
        )
    folder = prompt_dir(cls)
    for path in sorted(folder.glob("*.j2")) if folder else ():
        match = PROMPT_FILE.match(path.name)
        if not match or match["scenario"] != name or match["task"] not in cls.tasks:
            raise InvalidScenario(
                f"scenario {name!r}: prompt file {path} must be named {name}.<task>.v<N>.md.j2 for one of "
                f"its tasks ({', '.join(cls.tasks)})"
            )
    return specs


def prompt_dirs(extractors: Mapping[str, Any]) -> list[Path]:
    """The prompt folders of every scenario that has one."""
    return [d for d in (prompt_dir(cls) for cls in extractors.values()) if d is not None]


def lookup(components: Mapping[str, Any], name: str, what: str) -> Any:
    """Get a component by name, or fail naming the known ones and the closest matches."""
    if name in components:
        return components[name]
    close = difflib.get_close_matches(name, list(components), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownComponent(f"no {what} named {name!r}.{hint} Known: {', '.join(components) or 'none'}.")
