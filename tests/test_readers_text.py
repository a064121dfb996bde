"""The str.find parsers of `_text` give exactly what the lazy regexes they replaced give (the spec).

`parse_text_call` and `extract_issue` sit on the ingest hot path and scan with `str.find`; the
regexes below are their definition, and hypothesis drives both over texts built from the tags.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from extractors.readers._text import extract_issue, parse_text_call

_FUNC = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAM = re.compile(r"<parameter=([\w.\-]+)>\n?(.*?)\n?</parameter>", re.S)
_PR = re.compile(r"<pr_description>\s*(.*?)\s*</pr_description>", re.S)
_ISSUE_DESC = re.compile(r"<issue_description>\s*(.*?)\s*</issue_description>", re.S)
_ISSUE = re.compile(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", re.S)
_PR_PREFIX = re.compile(r"^Consider the following PR description:\s*", re.S)


def reference_call(content: str):
    start = content.find("<function=")
    if start < 0:
        return None
    m = _FUNC.match(content, start)
    if not m:
        return None
    return content[: m.start()].strip(), m.group(1), dict(_PARAM.findall(m.group(2)))


def reference_issue(prompt: str) -> str:
    for pattern in (_PR, _ISSUE_DESC, _ISSUE):
        m = pattern.search(prompt)
        if m and m.group(1).strip():
            return _PR_PREFIX.sub("", m.group(1).strip())
    return prompt.strip()


_CALL_PIECES = st.sampled_from(
    [
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
        ">",
        "\n",
        "bash",
        "command",
        "a.b-c",
        "x y",
        " ",
        "ls -la",
        "<",
        "=",
        "é",
    ]
)
_ISSUE_PIECES = st.sampled_from(
    [
        "<pr_description>",
        "</pr_description>",
        "<issue_description>",
        "</issue_description>",
        "ISSUE:",
        "INSTRUCTIONS:",
        "Consider the following PR description:",
        "\n",
        " ",
        "\t",
        "\u00a0",
        "fix the parser",
        "x",
    ]
)


_NOISE = st.lists(_CALL_PIECES, max_size=6).map("".join)
_NAMES = st.sampled_from(["bash", "command", "a.b-c", "x y", "", "path"])


@st.composite
def _calls(draw: st.DrawFn) -> str:
    """A call-shaped text: thought, `<function=NAME>`, parameters with noisy values, optional close."""
    params = draw(
        st.lists(
            st.tuples(_NAMES, st.sampled_from(["", "\n"]), _NOISE, st.sampled_from(["", "\n", "\n\n"])),
            max_size=4,
        )
    )
    body = "".join(
        f"{draw(_NOISE)}<parameter={name}>{lead}{value}{trail}</parameter>"
        for name, lead, value, trail in params
    )
    close = draw(st.sampled_from(["</function>", "", "</function> tail"]))
    return f"{draw(_NOISE)}<function={draw(_NAMES)}>{body}{draw(_NOISE)}{close}"


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.lists(_CALL_PIECES, max_size=24).map("".join), _calls()))
def test_parse_text_call_matches_the_regex_definition(content: str) -> None:
    assert parse_text_call(content) == reference_call(content)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_ISSUE_PIECES, max_size=16).map("".join))
def test_extract_issue_matches_the_regex_definition(prompt: str) -> None:
    assert extract_issue(prompt) == reference_issue(prompt)


def test_parse_text_call_reads_a_long_multi_parameter_call() -> None:
    body = "x = 1\n" * 5000
    content = (
        "I will create the file.\n\n<function=str_replace_editor>\n<parameter=command>create</parameter>\n"
        f"<parameter=path>/testbed/a.py</parameter>\n<parameter=file_text>\n{body}</parameter>\n</function>"
    )
    thought, tool, args = parse_text_call(content)
    assert (thought, tool) == ("I will create the file.", "str_replace_editor")
    assert args == {"command": "create", "path": "/testbed/a.py", "file_text": body[:-1]}
    assert parse_text_call(content) == reference_call(content)
