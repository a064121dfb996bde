"""`make audit-real`: the configs' `$APTFORGE_SHARED` paths, and a build that reads nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from flows import audit_real

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """scenario: dr
version: {version}
sources:
  - path: $APTFORGE_SHARED/{folder}
reports: []
tasks:
  plan:
    max_items_per_trajectory: 3
  summ_ans:
    max_items_per_trajectory: 1
generator:
  name: offline
seed: 3
keep_unknown: false
out_dir: out
"""


def test_a_relative_shared_folder_is_found_from_the_working_directory_and_an_empty_build_stops_the_audit(
    prefect_harness, tmp_path, monkeypatch, capsys
):
    shared = tmp_path / "shared"
    shutil.copytree(ROOT / "extractors" / "samples" / "dr" / "tapeagents", shared / "tapes")
    configs = tmp_path / "configs" / "real"
    configs.mkdir(parents=True)
    (configs / "dr.yaml").write_text(CONFIG.format(version="audit-test", folder="tapes"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTFORGE_SHARED", "shared")  # as CI sets it: relative to where the command runs
    argv = ["--configs", str(configs), "--out", str(tmp_path / "out"), "--markdown", str(tmp_path / "v.md")]

    assert audit_real.main(argv) == 0
    table = (tmp_path / "v.md").read_text()
    assert "| dr/audit-test | plan |" in table

    (configs / "empty.yaml").write_text(CONFIG.format(version="audit-empty", folder="no-such-folder"))
    assert audit_real.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{configs / 'empty.yaml'}: no run read from {shared.resolve() / 'no-such-folder'}" in err
