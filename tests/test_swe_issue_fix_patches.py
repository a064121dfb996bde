"""swe_issue_fix patch-level tasks on literal runs: locate windows, fix patches, reproduction scripts."""

from __future__ import annotations

import difflib

from extractors.base import ExtractOptions
from extractors.swe_issue_fix import SweIssueFix
from extractors.swe_issue_fix.mutations import patch_mutations, script_mutations
from extractors.swe_issue_fix.patch_tasks import clean_patch
from extractors.swe_issue_fix.patches import file_reads, parse_patch, render_patch
from schemas import Action, GoldStep, Outcome, Problem, Source, Step, Trajectory

FILE = [f"line {n}" for n in range(1, 21)]
FILE[9] = "    return a // b"
VIEW = "Here's the result of running `cat -n` on /testbed/calc/ops.py:\n" + "\n".join(
    f"{n:6}\t{text}" for n, text in enumerate(FILE, start=1)
)
PATCH = """diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -7,7 +7,7 @@ def div(a, b):
 line 7
 line 8
 line 9
-    return a // b
+    return a / b
 line 11
 line 12
 line 13
diff --git a/tests/test_ops.py b/tests/test_ops.py
--- a/tests/test_ops.py
+++ b/tests/test_ops.py
@@ -1,1 +1,2 @@
 import calc
+assert calc.div(7, 2) == 3.5
"""
SCRIPT = "from calc import div\nprint(div(7, 2))\n"


def _step(i, tool, args, raw, obs="ok") -> Step:
    return Step(index=i, thought="", action=Action(tool=tool, args=args, raw=raw), observation=obs)


def _create(i: int, path: str, text: str) -> Step:
    """The editor's `create` of a file, as SWE-agent writes it."""
    return _step(
        i,
        "str_replace_editor",
        {"command": "create", "path": path, "file_text": text},
        f"str_replace_editor create {path}",
        "File created",
    )


STEPS = [
    _step(
        0,
        "str_replace_editor",
        {"command": "view", "path": "/testbed/calc/ops.py"},
        "str_replace_editor view /testbed/calc/ops.py",
        VIEW,
    ),
    _create(1, "/testbed/repro.py", SCRIPT),
    _step(2, "bash", {"command": "cd /testbed && python repro.py"}, "cd /testbed && python repro.py", "3"),
    _step(
        3,
        "str_replace_editor",
        {"command": "str_replace", "path": "/testbed/calc/ops.py"},
        "str_replace_editor str_replace /testbed/calc/ops.py",
        "The file /testbed/calc/ops.py has been edited.",
    ),
    _step(4, "bash", {"command": "python repro.py"}, "python repro.py", "3.5"),
    _step(
        5,
        "str_replace_editor",
        {"command": "view", "path": "/testbed/calc/ops.py"},
        "str_replace_editor view /testbed/calc/ops.py",
        VIEW.replace("a // b", "a / b"),
    ),
    _step(6, "submit", {}, "submit", None),
]


def _traj(steps=STEPS, patch=PATCH, label="success", iid="calc-1", tid="t-ok") -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        kind="swe",
        task="div floors its result",
        steps=tuple(steps),
        patch=patch,
        outcome=Outcome(label=label, signal="row:resolved"),
        source=Source(format="swe_rows", file="runs.jsonl", line=1, instance_id=iid),
    )


def _extract(traj, task, extractor=None, options=None):
    out = list((extractor or SweIssueFix()).extract(traj, task, options or ExtractOptions(seed=2)))
    return [g for g in out if isinstance(g, GoldStep)], [p for p in out if isinstance(p, Problem)]


def test_hunks_are_read_by_their_header_counts_and_render_back_to_a_valid_diff():
    tricky = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n--- a sql comment\n+-- a sql comment\n keep\n"
    (f,) = parse_patch(tricky)
    assert f.path == "x.py" and f.hunks[0].lines == ("--- a sql comment", "+-- a sql comment", " keep")
    files = parse_patch(PATCH)
    assert [(f.path, f.is_test) for f in files] == [("calc/ops.py", False), ("tests/test_ops.py", True)]
    assert files[0].hunks[0].pre_image == [
        "line 7",
        "line 8",
        "line 9",
        "    return a // b",
        "line 11",
        "line 12",
        "line 13",
    ]
    assert parse_patch(render_patch(files)) == files


def test_only_reads_before_a_files_first_edit_count_as_its_original_lines():
    reads = file_reads(STEPS)
    assert reads.views["/testbed/calc/ops.py"][10] == "    return a // b"  # the later view is ignored
    assert reads.first_edit["/testbed/calc/ops.py"] == 3
    v0 = [
        _step(
            0, "open", {}, "open calc/ops.py", "[File: /calc/calc/ops.py (20 lines total)]\n9:line 9\n10:x"
        ),
        _step(
            1,
            "edit",
            {},
            "edit 10:10\n    return a / b\nend_of_edit",
            "[File: /calc/calc/ops.py (20 lines total)]\n10:y",
        ),
    ]
    assert file_reads(v0).views == {"/calc/calc/ops.py": {9: "line 9", 10: "x"}}


def test_locate_gold_is_the_hunks_window_and_its_candidates_are_shifted_windows_of_the_same_length():
    (g,), problems = _extract(_traj(), "locate")
    assert not problems and g.step_index == 0 and g.fields == {"issue_statement": "div floors its result"}
    assert g.gold == "\n".join(FILE[6:13])
    # same length, never the changed line 10, and no two closer than half a window: lines 3-9, 11-17
    assert [c.text for c in g.candidates] == ["\n".join(FILE[2:9]), "\n".join(FILE[10:17])]
    assert [c.origin for c in g.candidates] == ["rule:shifted_window:-4", "rule:shifted_window:+4"]
    assert all("a // b" not in c.text for c in g.candidates)


def test_a_window_the_run_never_showed_is_a_problem_with_the_reason():
    _, problems = _extract(_traj(steps=STEPS[1:]), "locate")
    assert [(p.reason, p.severity) for p in problems] == [("window_not_seen", "info")]


def test_fix_patch_gold_leaves_tests_out_and_failed_runs_of_the_same_instance_lead_the_candidates():
    wrong = PATCH.replace("+    return a / b", "+    return float(a // b)")
    runs = [
        _traj(),
        _traj(patch=wrong, label="failure", tid="t-bad"),
        _traj(patch=wrong, label="failure", iid="other", tid="t-x"),
    ]
    extractor = SweIssueFix()
    extractor.use(SweIssueFix.observe(runs))
    assert sorted(extractor.observed.patches) == ["calc-1", "other"]
    (g,), _ = _extract(_traj(), "fix_patch", extractor)
    assert "tests/test_ops.py" not in g.gold and "+    return a / b" in g.gold
    assert "float(a // b)" in g.candidates[0].text and "tests/test_ops.py" not in g.candidates[0].text
    assert g.gold not in [c.text for c in g.candidates]
    assert g.candidates[0].origin == "same_instance:failed_run"
    # then mutations of the gold, each a valid diff of the gold's own file
    assert all(c.origin.startswith("rule:") for c in g.candidates[1:]) and len(g.candidates) >= 2
    assert all([f.path for f in parse_patch(c.text)] == ["calc/ops.py"] for c in g.candidates)
    _, problems = _extract(
        _traj(patch=PATCH.split("diff --git a/tests")[0].replace("calc/ops", "tests/test_x")), "fix_patch"
    )
    assert [p.reason for p in problems] == ["no_source_patch"]


def test_patch_mutations_are_plausible_wrong_fixes_of_the_gold_file():
    two = parse_patch(
        PATCH.replace("+    return a / b", "+    return a / b if b != 0 else None\n+    pass").replace(
            "@@ -7,7 +7,7 @@", "@@ -7,7 +7,8 @@"
        )
    )
    source = [f for f in two if not f.is_test]
    made = patch_mutations(source, {})
    kinds = {k for k, _ in made}
    assert {"partial_fix", "reverted_condition", "kept_old_line", "double"} <= kinds
    # the change made the other way removes lines the file does not have: a patch that does not apply
    assert "reversed_change" not in kinds
    assert not [t for _, t in made if "-    return a / b if b != 0 else None" in t]
    reverted = next(text for kind, text in made if kind == "reverted_condition")
    assert "b == 0" in reverted and parse_patch(reverted)[0].hunks[0].render().startswith("@@ -7,7 +7,8 @@")
    gold = render_patch(source)
    assert gold not in [t for _, t in made] and len({t for _, t in made}) == len(made)
    assert all([f.path for f in parse_patch(t)] == ["calc/ops.py"] for _, t in made)


def test_the_right_change_in_the_wrong_function_is_a_hunk_moved_where_the_same_line_also_occurs():
    seen = {n: f"line {n}" for n in range(1, 31)}
    seen[10] = seen[24] = "    return a // b"
    files = [f for f in parse_patch(PATCH) if not f.is_test]
    moved = [t for k, t in patch_mutations(files, {"calc/ops.py": seen}) if k == "wrong_location"]
    (hunk,) = parse_patch(moved[0])[0].hunks
    assert (
        hunk.old_start == 21 and hunk.pre_image[3] == "    return a // b" and hunk.pre_image[0] == "line 21"
    )


def test_a_moved_hunk_has_the_heading_git_gives_its_new_place_or_is_not_made():
    # a bare `@@` line among options whose `@@` lines name their function told the gold apart
    seen = {n: f"line {n}" for n in range(1, 31)}
    seen[10] = seen[24] = "    return a // b"
    seen[15] = "    def floor_div(self, a, b):  # " + "x" * 80
    files = [f for f in parse_patch(PATCH) if not f.is_test]
    moved = [t for k, t in patch_mutations(files, {"calc/ops.py": seen}) if k == "wrong_location"]
    (hunk,) = parse_patch(moved[0])[0].hunks
    assert hunk.old_start == 21
    heading = "def floor_div(self, a, b):  # " + "x" * 80
    assert hunk.section == " " + heading[:80]  # git's 80 bytes, the indent left out
    del seen[5]  # the lines shown no longer reach the top of the file or a heading: no variant
    del seen[15]
    assert not [t for k, t in patch_mutations(files, {"calc/ops.py": seen}) if k == "wrong_location"]


def test_script_mutations_revert_the_check_change_the_input_and_never_break_a_name():
    script = (
        "from calc import div\nresult = div(7, 2)\nresult = div(result, 1)\nvalue = result * 2\n"
        "if __name__ == '__main__':\n    if result != 3.5:\n        print('Issue reproduced')\n"
        "    assert value > 10\n"
    )
    made = script_mutations(script)
    kinds = [k for k, _ in made]
    assert {"reverted_check", "changed_input", "dropped_step", "swapped_steps"} <= set(kinds)
    # a number changed where the script checks it, never an input that rarely matters (`div(7, 2)`)
    changed = [t for k, t in made if k == "changed_input"]
    assert any("assert value > 11" in t for t in changed) and all("div(7, 2)" in t for t in changed)
    # two steps swapped only where the order matters: `value` then reads the older `result`; the
    # first two swapped would read `result` before it exists (a NameError, no plausible test)
    swapped = [t for k, t in made if k == "swapped_steps"]
    assert "value = result * 2\nresult = div(result, 1)" in swapped[0]
    assert not any(t.startswith("from calc import div\nresult = div(result, 1)") for t in swapped)
    reverted = [t for k, t in made if k == "reverted_check"]
    assert any("if result == 3.5:" in t for t in reverted) and all(
        "__name__ ==" in t for t in reverted
    )  # no guard reverted
    dropped = [t for k, t in made if k == "dropped_step"]
    assert dropped and all("result = div(7, 2)" in t for t in dropped)  # `result` is used later
    assert kinds.index("dropped_step") > kinds.index("reverted_check")
    assert script not in [t for _, t in made]


def test_gold_patches_are_cleaned_of_files_the_issue_does_not_need_and_say_why():
    def new(path):
        return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n"

    def changed(path):
        return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"

    text = (
        "".join(
            [
                changed("calc/ops.py"),
                new("reproduce.py"),
                changed("setup.py"),
                changed("AUTHORS"),
                new("test_app/models.py"),
            ]
        )
        + new("calc/helpers.py")
        + changed("tox.ini")
    )
    cleaned = clean_patch(parse_patch(text))
    assert [f.path for f in cleaned.files] == ["calc/ops.py", "calc/helpers.py"]
    assert cleaned.dropped == [
        ("reproduce.py", "new_root_file"),
        ("setup.py", "packaging_pin"),
        ("AUTHORS", "changelog"),
        ("test_app/models.py", "new_scaffold_folder"),
        ("tox.ini", "packaging_pin"),
    ]


def test_test_patch_golds_are_the_scripts_run_before_the_fix_and_again_after_and_the_test_diff():
    (g, diff), _ = _extract(_traj(), "test_patch")
    assert (
        g.gold == SCRIPT and g.step_index == 1 and g.fields == {"problem_statement": "div floors its result"}
    )
    # the test files of the patch are a test patch too (SWE-bench's own kind), with mutations of it
    assert diff.gold == render_patch([f for f in parse_patch(PATCH) if f.is_test])
    assert diff.candidates and all(c.origin.startswith("rule:") for c in diff.candidates)
    assert any("== 4.5" in c.text or "!= 3.5" in c.text for c in diff.candidates)
    never_rerun = [s for s in STEPS if s.index != 4]
    source_only = PATCH[: PATCH.index("diff --git a/tests")]
    _, problems = _extract(_traj(steps=never_rerun, patch=source_only), "test_patch")
    assert [p.reason for p in problems] == ["no_test_patch"]


def test_test_patch_takes_every_distinct_script_of_a_run_the_last_written_first():
    other = "from calc import div\nassert div(1, 4) == 0.25, div(1, 4)\n"
    near = SCRIPT.replace("(7, 2)", "(7, 3)")
    extra = [
        _create(1, "/testbed/check.py", other),
        _step(2, "bash", {"command": "python check.py"}, "python check.py", "AssertionError"),
        _create(3, "/testbed/repro2.py", near),
        _step(4, "bash", {"command": "python repro2.py"}, "python repro2.py", "2"),
    ]
    steps = [STEPS[0], *extra, *STEPS[1:]]
    steps = [s.model_copy(update={"index": i}) for i, s in enumerate(steps)]
    steps += [
        _step(
            len(steps),
            "bash",
            {"command": "python check.py && python repro2.py"},
            "python check.py && python repro2.py",
            "ok",
        )
    ]
    source_only = PATCH[: PATCH.index("diff --git a/tests")]
    golds, _ = _extract(_traj(steps=steps, patch=source_only), "test_patch")
    # repro.py was written last; repro2.py is the same check on other numbers (left out); check.py is another
    assert [g.gold for g in golds] == [SCRIPT, other]
    assert [g.step_index for g in golds] == [5, 1]
    one, _ = _extract(
        _traj(steps=steps, patch=source_only),
        "test_patch",
        options=ExtractOptions(seed=2, max_items_per_trajectory=1),
    )
    assert [g.gold for g in one] == [SCRIPT]


OPS_HEADER = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
GUARD = (
    OPS_HEADER
    + """@@ -7,7 +7,9 @@ def div(a, b):
 line 7
 total = len(items)
 scale = factor
-    ratio = total * scale
+    if b == 0:
+        raise ZeroDivisionError(b)
+    share = total / scale
     return a // b
 line 11
 line 12
"""
)


def test_patch_mutations_lengthen_as_often_as_they_shorten_and_cluster_around_a_base():
    source = parse_patch(GUARD)
    gold = render_patch(source)
    made = patch_mutations(source, {})
    kinds = {k for k, _ in made}
    assert {"extra_name", "off_by_one", "double", "reverted_condition"} <= kinds
    # the right statement kept and repeated on another name of the hunk: one line more than the gold
    extra = next(t for k, t in made if k == "extra_name")
    assert "+    share = total / scale\n+    " in extra and extra.count("= total / scale") == 2
    assert extra.count("\n+") == gold.count("\n+") + 1
    # longer and not longer than the gold in turn, so the first options already allow any length rank
    longer = [len(t) > len(gold) for _, t in made]
    both = 2 * min(sum(longer), len(longer) - sum(longer))
    assert both >= 4 and all(longer[k] != longer[k + 1] for k in range(both - 1)), longer
    # a reverted condition adding a `not` comes after those that do not (`==` -> `!=` first)
    reverted = [t for k, t in made if k == "reverted_condition"]
    assert "if b != 0:" in reverted[0]
    # two doubles on one base: the base, not the gold, is then the centre of three options
    doubles = [t for k, t in made if k == "double"]
    singles = {t for k, t in made if k != "double"}
    bases = [s for s in singles if sum(_one_line_apart(s, d) for d in doubles) >= 2]
    assert bases and all(t != gold for t in doubles)


def _one_line_apart(a: str, b: str) -> bool:
    la, lb = a.split("\n"), b.split("\n")
    return len(la) == len(lb) and sum(x != y for x, y in zip(la, lb, strict=True)) == 1


def test_off_by_one_moves_lengths_ranges_and_indexes():
    body = "+    end = len(items)\n+    for k in range(count):\n+        out.append(items[i])\n"
    patch = GUARD.split("+    if b == 0:")[0] + body + "     return a // b\n line 11\n line 12\n"
    texts = [t for k, t in patch_mutations(parse_patch(patch), {}) if k == "off_by_one"]
    assert any("len(items) - 1" in t for t in texts)
    assert any("range(count + 1)" in t for t in texts)
    assert any("items[i + 1]" in t for t in texts)


def test_a_pure_insertion_gets_a_dropped_line_and_a_wrong_variable_and_is_never_the_option_with_most_lines():
    insert = (
        OPS_HEADER
        + """@@ -7,5 +7,8 @@ def div(a, b):
 line 7
     total = sum(values)
+    if count == 0:
+        count = len(values)
+        total = total or 0
     mean = total / count
     return mean
"""
    )
    made = patch_mutations(parse_patch(insert), {})
    kinds = {k for k, _ in made}
    dropped = next(t for k, t in made if k == "dropped_line")
    assert "+        total = total or 0\n-    mean = total / count\n" in dropped
    # a partial fix never drops the `if` of its body (an orphaned indented line does not parse)
    assert all("+    if " in t for _, t in made if "+        count = len" in t)
    # the variable the insertion acts on swapped for another one of its context (never `self`, `len`)
    assert any(k == "wrong_name" and "if total == 0:" in t for k, t in made)
    assert not any("self" in t or "len == 0" in t for _, t in made)
    assert {"partial_fix", "reverted_condition"} <= kinds
    gold_lines = render_patch(parse_patch(insert)).count("\n")
    counts = [(t.count("\n") < gold_lines, t.count("\n") > gold_lines) for _, t in made]
    assert sum(f for f, _ in counts) >= 2  # two partial fixes: one may lead, the other waits
    # fewer-line variants never run ahead of more-line ones by two, but those held back at the end
    cut = next(k for k in range(len(counts) + 1) if all(f for f, _ in counts[k:]))
    fewer = more = 0
    for f, m in counts[:cut]:
        fewer, more = fewer + f, more + m
        assert fewer <= more + 1, counts


def test_script_mutations_make_the_triggering_call_another_way():
    script = (
        "from sympy import Mul, Max, Symbol\n"
        "x = Symbol('x')\n"
        "qs = Book.objects.order_by('record__root_id')\n"
        "other = Book.objects.order_by('record__root__id')\n"
        "print(Mul(Max(0, y), x, evaluate=False).evalf())\n"
        "r = Mul(Max(0, y), x, evaluate=False)\n"
        "unused = Symbol('z', commutative=False)\n"
        "def ask(self, name, flag=True):\n"
        "    return r\n"
        "print(r.evalf())\n"
    )
    made = script_mutations(script, issue="order_by('record__root_id') and record__root__id differ")
    texts = {t for _, t in made}
    assert any("r = Mul(Max(0, y), x, evaluate=True)" in t for t in texts)  # a flag flipped
    assert any("r = Mul(x, Max(0, y), evaluate=False)" in t for t in texts)  # the arguments exchanged
    # a string the issue names, replaced by another one it names: the working input
    assert any("qs = Book.objects.order_by('record__root__id')" in t for t in texts)
    # a definition's parameters are no call: never swapped nor flipped
    assert all("def ask(self, name, flag=True):" in t for t in texts)
    # a flag of a value nothing reads flipped changes nothing: never offered
    assert not any("commutative=True" in t for t in texts)
    # a print is never the call made another way
    assert not any("print(Mul(Max(0, y), x, evaluate=True)" in t for t in texts)


DOCS_AND_CODE = "\n".join(
    [
        "diff --git a/calc/ops.py b/calc/ops.py",
        "--- a/calc/ops.py",
        "+++ b/calc/ops.py",
        "@@ -1,7 +1,7 @@",
        " import os",
        "-from calc.util import clean",
        "+from calc.util import clean, pad",
        " import sys",
        " ",
        " def div(a, b):",
        "@@ -20,9 +20,8 @@ def div(a, b):",
        "     Divide a by b.",
        " ",
        "-    Note that the same list is returned each time.",
        "     >>> div(6, 2)",
        "-    3",
        "+    3.0",
        '     """',
        "     total = 0",
        "     rows = pad(values)",
        "+    total = sum(x for x, y in zip(rows, values))",
        "     return total / b",
        "",
    ]
)


def test_mutations_change_code_never_only_docs_imports_or_the_order_of_independent_lines():
    made = patch_mutations(parse_patch(DOCS_AND_CODE), {})
    gold = render_patch(parse_patch(DOCS_AND_CODE))
    assert not any(
        k == "wrong_line" and "+from calc.util import clean, pad\n import os" in t for k, t in made
    )
    docs = ("Note that", ">>>", "3", '"""', "Divide")
    for kind, text in made:
        changed = [  # the content of each patch line that differs (diff marker and patch prefix cut)
            ln[3:].strip()
            for ln in difflib.ndiff(gold.split("\n"), text.split("\n"))
            if ln[:1] in "+-" and not ln[2:].startswith("@@")
        ]
        # every variant changes a line of code, not only the docstring or a comment
        assert any(c and not c.startswith(docs) for c in changed), (kind, changed)
        assert " not in zip(" not in text  # `for x, y not in ...` is no Python
    # the import hunk alone dropped leaves `pad` undefined: a real partial fix; the docstring hunk
    # dropped too, as it also adds the sum (code); a kept old import changes nothing, so never offered
    assert not any(k == "kept_old_line" and "-from calc.util import clean\n" not in t for k, t in made)
    # `rows` is assigned by the line above the new one: moving the new line past it is a real mistake
    moved = [t for k, t in made if k == "wrong_line"]
    assert any(
        "+    total = sum(x for x, y in zip(rows, values))\n     rows = pad(values)" in t for t in moved
    )


def test_script_mutations_change_what_the_script_does_never_only_a_message():
    script = (
        "import django\n"
        "django.setup()\n"
        "from app.models import Book\n"
        "pattern = r'entries/(\\w+)'\n"
        "Book.objects.create(name='Book 1')\n"
        "result = replace_groups(pattern)\n"
        'print(f"Pattern: {pattern}")\n'
        "try:\n"
        "    check(result)\n"
        "except Exception:\n"
        "    traceback.print_exc()\n"
        "if result == 'entries/<var>':\n"
        '    print("the result is right, not the pattern")\n'
    )
    made = script_mutations(script)
    texts = [t for _, t in made]
    # the check made on another variable: the input instead of the result
    assert any("if pattern == 'entries/<var>':" in t for k, t in made if k == "wrong_name")
    # never a word of a message, never a digit inside a string, never the setup or a traceback print
    assert all('print("the result is right, not the pattern")' in t for t in texts)
    assert not any("Book 2" in t for t in texts)
    assert all("django.setup()" in t and "traceback.print_exc()" in t for t in texts)


def test_script_mutations_flip_a_flag_of_a_call_spread_over_lines_and_a_call_only_a_print_makes():
    spread = (
        "from django import forms\n"
        "MyFormSet = forms.formset_factory(\n"
        "    form=MyForm,\n"
        "    can_delete=True,\n"
        "    can_delete_extra=False,\n"
        ")\n"
        "print(MyFormSet().empty_form)\n"
    )
    texts = {t for _, t in script_mutations(spread)}
    assert any("    can_delete=False,\n    can_delete_extra=False," in t for t in texts)
    assert any("    can_delete=True,\n    can_delete_extra=True," in t for t in texts)
    only_prints = "from sympy import Mul, Max, Symbol\nx = Symbol('x')\ny = Symbol('y')\n"
    only_prints += "print(Mul(Max(0, y), x, evaluate=False).evalf(), flush=True)\n"
    texts = {t for _, t in script_mutations(only_prints)}
    assert any("print(Mul(x, Max(0, y), evaluate=False)" in t for t in texts)  # the order that works
    assert any("print(Mul(Max(0, y), x, evaluate=True)" in t for t in texts)
    assert not any("flush=False" in t for t in texts)  # the print's own flag changes nothing


def test_patch_mutations_of_a_python_file_never_leave_code_that_does_not_parse():
    from extractors.swe_issue_fix.mutations import parse_window, parses

    patch = (
        OPS_HEADER
        + """@@ -20,9 +20,11 @@ def evalf(x, prec):
         elif re.is_number:
             re = re._to_mpmath(prec)
             reprec = prec
+        else:
+            raise NotImplementedError
         if im == 0:
             im = None
             imprec = None
         r = re, im, reprec, imprec
     except AttributeError:
"""
    )
    files = parse_patch(patch)
    (hunk,) = files[0].hunks
    assert parse_window(hunk) == (1, 1)  # cut inside `try:` and `if ...: elif`: their ends left out
    assert parses(hunk, (1, 1)) and not parses(hunk)
    made = patch_mutations(files, {})
    assert made
    for _, text in made:
        (h,) = parse_patch(text)[0].hunks
        assert parses(h, (1, 1)), text
    # dropping the raise leaves an `else:` with no body
    assert not any("+        else:\n         if im" in t for _, t in made)


def test_script_mutations_flip_a_positional_flag_swap_later_arguments_and_unwrap_a_made_value():
    script = (
        "import xarray as xr\n"
        "from django.utils.translation import gettext_lazy as _\n"
        "t.set_antialiased(True)\n"
        "out = xr.where(x > 0, 1, 0, keep_attrs=True)\n"
        "lazy = _('DATE_FORMAT')\n"
        "print(get_format(lazy), out)\n"
    )
    texts = {t for _, t in script_mutations(script)}
    assert any("t.set_antialiased(False)" in t for t in texts)
    assert any("xr.where(x > 0, 0, 1, keep_attrs=True)" in t for t in texts)
    assert any("lazy = 'DATE_FORMAT'\n" in t for t in texts)  # the plain string, not the lazy one


def test_an_old_assignment_kept_before_its_new_value_is_no_distractor():
    patch = (
        OPS_HEADER
        + """@@ -25,5 +25,5 @@ except ImportError:
 import re
 from docutils import nodes
-docinfo_re = re.compile(':\\\\w+:.*?')
+docinfo_re = re.compile(r':\\w+:(?:\\s|$)')
 symbols_re = re.compile(r'([!-\\-/:-@\\[-`{-~])')
 SECTIONING_CHARS = ['=', '-', '~']
"""
    )
    made = patch_mutations(parse_patch(patch), {})
    # the old value kept before the new one changes nothing (the new assignment wins): kept after it
    kept = [t for k, t in made if k == "kept_old_line"]
    assert kept and all(t.index("+docinfo_re") < t.index(" docinfo_re") for t in kept)
    assert not any(
        " docinfo_re = re.compile(':" in t and t.index(" docinfo_re") < t.index("+docinfo_re")
        for _, t in made
    )
