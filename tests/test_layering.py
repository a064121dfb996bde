"""The layering is enforced, not hoped for: the import contract holds, a deliberate violation breaks it,
and no table outside a scenario's package names a scenario or a task."""

from __future__ import annotations

import ast
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from schemas import registered_tasks

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "extractors", "generators", "annotations", "flows")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
RUFF = Path(sys.executable).with_name("ruff")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def _copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("samples", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_import_contract_holds_on_the_tree():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_schemas_importing_flows_breaks_the_contract(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "schemas" / "violation.py").write_text('"""A deliberate violation."""\n\nimport flows.config\n')
    result = _lint_imports(root)
    assert result.returncode == 1
    assert "BROKEN" in result.stdout and "schemas.violation -> flows.config" in result.stdout


def test_a_scenario_importing_a_reader_breaks_the_contract(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "extractors" / "dr" / "violation.py").write_text(
        '"""A deliberate violation."""\n\nimport extractors.readers.miroflow\n'
    )
    result = _lint_imports(root)
    assert (
        result.returncode == 1 and "extractors.dr.violation -> extractors.readers.miroflow" in result.stdout
    )


def test_a_function_above_complexity_15_fails_lint(tmp_path):
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(16))
    (tmp_path / "complex.py").write_text(
        f'"""Too many branches."""\n\n\ndef pick(x):\n{branches}\n    return -1\n'
    )
    result = subprocess.run(
        [str(RUFF), "check", "--config", str(ROOT / "pyproject.toml"), "--select", "C901", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "C901" in result.stdout and "(17 > 15)" in result.stdout


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings (comments are not in the AST at all)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
        # attribute docstrings: a bare string right after an assignment
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for prev, cur in itertools.pairwise(body):
                if (
                    isinstance(prev, (ast.Assign, ast.AnnAssign))
                    and isinstance(cur, ast.Expr)
                    and isinstance(cur.value, ast.Constant)
                ):
                    docstrings.add(id(cur.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_scenario_or_task_name_is_written_in_the_shared_layers():
    scenarios = {s for s, _ in registered_tasks()}
    names = scenarios | {spec.dataset for spec in registered_tasks().values()}
    names |= {t for _, t in registered_tasks()} - {"plan", "action", "error"}  # generic words elsewhere
    found = []
    for layer in ("schemas", "generators", "annotations", "flows"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, text in _code_strings(path):
                if text in names:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not found, "\n".join(found)
