"""File-view commands of every SWE format become (path, line -> text) windows; writers are recognised."""

from __future__ import annotations

import pytest

from extractors.shell.views import heredoc_file, may_write, output_parts, parse_view


def _mini(body: str, code: int = 0) -> str:
    return f"<returncode>{code}</returncode>\n<output>\n{body}\n</output>"


NUMBERED = "\n".join(f"{n:6}\t{t}" for n, t in [(120, "def f():"), (121, "    return 1"), (122, "")])


@pytest.mark.parametrize(
    ("command", "observation", "path", "lines"),
    [
        (
            "nl -ba pkg/a.py | sed -n '120,122p'",
            _mini(NUMBERED),
            "pkg/a.py",
            {120: "def f():", 121: "    return 1", 122: ""},
        ),
        ("cat -n pkg/a.py", _mini(NUMBERED), "pkg/a.py", {120: "def f():", 121: "    return 1", 122: ""}),
        (
            "cd /testbed && nl -ba pkg/a.py | grep -C 1 'def f'",
            _mini(NUMBERED),
            "pkg/a.py",
            {120: "def f():", 121: "    return 1", 122: ""},
        ),
        (
            "sed -n '139,141p' pkg/a.py",
            _mini("x = 1\ny = 2\nz = 3"),
            "pkg/a.py",
            {139: "x = 1", 140: "y = 2", 141: "z = 3"},
        ),
        ("sed -n '7p' pkg/a.py", _mini("x = 1"), "pkg/a.py", {7: "x = 1"}),
        ("sed -n '10,40p' pkg/a.py | head -n 2", _mini("a\nb"), "pkg/a.py", {10: "a", 11: "b"}),
        ("head -n 2 pkg/a.py", _mini("import os\nimport re"), "pkg/a.py", {1: "import os", 2: "import re"}),
        ("tail -n +348 pkg/a.py", _mini("a\nb"), "pkg/a.py", {348: "a", 349: "b"}),
        ("cat pkg/a.py", _mini("a\n\nb"), "pkg/a.py", {1: "a", 2: "", 3: "b"}),
        ("grep -n 'def f' pkg/a.py", _mini("120:def f():"), "pkg/a.py", {120: "def f():"}),
        (
            "grep -n -A 1 'def f' pkg/a.py",
            _mini("120:def f():\n121-    return 1"),
            "pkg/a.py",
            {120: "def f():", 121: "    return 1"},
        ),
        ("grep -rn 'def f' pkg", _mini("pkg/a.py:120:def f():"), "pkg/a.py", {120: "def f():"}),
        (
            "str_replace_editor view /testbed/pkg/a.py  --view_range 120 122",
            "Here's the result of running `cat -n` on /testbed/pkg/a.py:\n" + NUMBERED,
            "/testbed/pkg/a.py",
            {120: "def f():", 121: "    return 1", 122: ""},
        ),
        (
            "open pkg/a.py",
            "[File: /r/pkg/a.py (300 lines total)]\n120:def f():\n121:    return 1",
            "/r/pkg/a.py",
            {120: "def f():", 121: "    return 1"},
        ),
    ],
)
def test_every_common_view_command_gives_the_lines_it_printed_by_number(command, observation, path, lines):
    view = parse_view(command, observation)
    assert view is not None and view.path == path and view.lines == lines


@pytest.mark.parametrize(
    ("command", "observation"),
    [
        ("sed -n '/def f/,/return/p' pkg/a.py", _mini("def f():")),  # no line number to anchor it
        ("nl pkg/a.py", _mini(NUMBERED)),  # plain `nl` skips blank lines: its numbers are not file lines
        ("sed -n '1,2p' pkg/a.py", _mini("sed: can't read", code=2)),
        ("sed -i 's/a/b/' pkg/a.py && sed -n '1,2p' pkg/a.py", _mini("a\nb")),
        ("grep -rn 'x' pkg", _mini("pkg/a.py:1:x\npkg/b.py:2:x")),  # two files in one output
        ("cat <<'EOF' > repro.py\nprint(1)\nEOF", _mini("")),
        ("tail -n 5 pkg/a.py", _mini("a")),  # the end of a file of unknown length
    ],
)
def test_commands_whose_line_numbers_are_unknown_or_not_views_give_nothing(command, observation):
    assert parse_view(command, observation) is None


def test_cut_outputs_keep_only_whole_lines():
    obs = "<returncode>0</returncode>\n<output_head>\na\nb\npartial</output_head>\n<elided_chars>\n900 characters elided\n</elided_chars>\n<output_tail>\ncut\nz\n</output_tail>"
    head, tail = output_parts(obs)
    assert head == "a\nb" and tail == "z"
    view = parse_view("cat pkg/a.py", obs)
    assert view is not None and view.lines == {1: "a", 2: "b"}  # the tail's numbers are unknown


def test_writers_name_what_they_may_have_changed_and_a_heredoc_writes_only_its_target():
    assert "pkg/a.py" in may_write("sed -i 's/x/y/' pkg/a.py")
    assert may_write("cat pkg/a.py") == ""
    heredoc = "cat <<'EOF' > repro.py\nfrom pkg.a import f  # pkg/a.py is only read\nEOF"
    assert may_write(heredoc) == "cat <<'EOF' > repro.py" and heredoc_file(heredoc) == (
        "repro.py",
        "from pkg.a import f  # pkg/a.py is only read\n",
    )
    edit = "import re\np = 'pkg/a.py'\nopen(p, 'w').write('x')\n"
    assert may_write("python fix.py", {"fix.py": edit}) == edit
    assert may_write("python repro.py", {"repro.py": "print(1)\n"}) == ""
