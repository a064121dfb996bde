"""The extension points: tag, then collect; read-only mappings; loud duplicates; helpful misses."""

from __future__ import annotations

import sys
import textwrap

import pytest

from extractors.discovery import (
    DuplicateComponent,
    UnknownComponent,
    discover_extractors,
    discover_readers,
    lookup,
)


def test_discovery_finds_the_in_tree_readers_and_extractors_by_module_name():
    readers = discover_readers()
    assert {"swe_agent_traj", "swe_rows"} <= set(readers)
    extractors = discover_extractors()
    assert extractors["swe_issue_fix"].__module__ == "extractors.swe_issue_fix"
    with pytest.raises(TypeError):
        readers["x"] = object  # type: ignore[index]


def test_readers_are_ordered_by_sniffing_priority():
    prios = [cls.priority for cls in discover_readers().values()]
    assert prios == sorted(prios)


def test_a_lookup_miss_names_the_close_matches():
    with pytest.raises(UnknownComponent, match="Did you mean swe_issue_fix"):
        lookup(discover_extractors(), "swe_issue_fx", "extractor")


def test_a_new_scenario_is_one_module_and_duplicates_fail_loudly(tmp_path, monkeypatch):
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = textwrap.dedent("""
        from extractors.base import extractor

        @extractor("{name}", version=1, reads={{"swe"}}, tasks=("plan",))
        class X:
            def extract(self, traj, task, options):
                return iter(())
    """)
    (pkg / "alpha.py").write_text(body.format(name="alpha"))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover_extractors(package="plugpkg", group="aptforge.none")
    assert list(found) == ["alpha"] and found["alpha"].version == 1
    (pkg / "beta.py").write_text(body.format(name="alpha"))
    sys.modules.pop("plugpkg.beta", None)
    with pytest.raises(DuplicateComponent, match="alpha"):
        discover_extractors(package="plugpkg", group="aptforge.none")
