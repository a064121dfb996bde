"""Find readers and extractors by their tag: in this package, and in entry points.

`discover_*` are pure functions returning read-only mappings; a duplicate name fails loudly
and a lookup miss names the near misses. Flows pick components by name from config.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import MappingProxyType, ModuleType
from typing import Any

from extractors.base import EXTRACTOR_TAG, READER_TAG


class DuplicateComponent(RuntimeError):
    """Two components share a name."""


class UnknownComponent(KeyError):
    """A name that matches no component; the message lists the close ones."""


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
    """All scenario extractors, by name (== module or package name for in-tree ones)."""
    return MappingProxyType(_collect(_modules(package) + _entry_point_modules(group), EXTRACTOR_TAG))


def lookup(components: Mapping[str, Any], name: str, what: str) -> Any:
    """Get a component by name, or fail naming the known ones and the closest matches."""
    if name in components:
        return components[name]
    close = difflib.get_close_matches(name, list(components), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownComponent(f"no {what} named {name!r}.{hint} Known: {', '.join(components) or 'none'}.")
