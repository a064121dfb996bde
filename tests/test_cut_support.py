"""The cut-option check used over the real runs' builds: it finds our cuts and lets the runs' own ellipses be."""

from __future__ import annotations

import json

from tests.cut_support import cut_options

RUN = ['print("Working...")', ">>> for p in partitions(6):\n...     print(p)", "See page 245. ... brush up"]


def test_an_ellipsis_the_runs_wrote_is_not_a_cut_but_ours_is():
    step = json.dumps({"planning": "Run it", "execution": {"name": "python_code", "args": {"code": RUN[0]}}})
    kept = [
        "Run `pip install x`",
        step,
        ">>> for p in partitions(6):\n...     print(p)",
        "See page 245. ... brush",
    ]
    cut = [
        "1. Run `python train.py --epochs 2 --corpus corpus/to...`",
        "I need to open the parser module and look at the split...",
        "head\n[... 120 characters omitted ...]\ntail",
        "Clone the repository and run…",
    ]
    assert cut_options(kept + cut, RUN) == cut
