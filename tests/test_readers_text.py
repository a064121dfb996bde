"""The str.find parsers of `_text` give exactly what the lazy regexes they replaced give (the spec).

`parse_text_call` and `extract_issue` sit on the ingest hot path and scan with `str.find`; the
regexes below are their definition, and hypothesis drives both over texts built from the tags.
`parse_text_call` reads a call of the common shape with one `match` (`_fast_text_call`) and any
other text with the full parser (`_full_text_call`): wherever the fast path answers, it answers what
the full parser and the definition do.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from extractors.readers._text import _fast_text_call, _full_text_call, extract_issue, parse_text_call

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


#: Value pieces for well-formed calls: text, newlines, and near-misses of every tag (so values hold
#: `<`, `</param`, `</function` without closing anything, and sometimes the real closing tags).
_VALUE_PIECES = st.sampled_from(
    [
        "ls -la",
        "x < y",
        "<",
        "</",
        "</param",
        "</parameter",
        "parameter>",
        "</function",
        "function>",
        "<parameter=x>",
        "<function=bash>",
        "</parameter>",
        "</function>",
        "\n",
        "\n\n",
        " ",
        "é",
        "\u2028",
        "a",
    ]
)
_GAPS = st.sampled_from(["", "\n", "\n\n", " ", "\t\n", "text", "x > y", "<", "<b>"])


@st.composite
def _clean_calls(draw: st.DrawFn) -> str:
    """A call as agents write it (`\\n<parameter=NAME>VALUE</parameter>\\n` ... `</function>`), with
    noisy values and gaps, so that the fast path reads most of them."""
    params = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["command", "path", "old_str", "a.b-c", "x y", "", "né", "x\u0661"]),
                st.sampled_from(["", "\n"]),
                st.lists(_VALUE_PIECES, max_size=8).map("".join),
                st.sampled_from(["", "\n", "\n\n"]),
                _GAPS,
            ),
            min_size=0,
            max_size=4,
        )
    )
    body = "".join(
        f"{gap}<parameter={name}>{lead}{value}{trail}</parameter>" for name, lead, value, trail, gap in params
    )
    close = draw(st.sampled_from(["\n</function>", "</function>", "", "\n", "\n</function> tail", "\n<x>"]))
    thought = draw(st.sampled_from(["", "I will look.\n\n", "  a <b> c  ", "<function", "</function>"]))
    name = draw(st.sampled_from(["bash", "str_replace_editor", "a.b-c", "x y", "", "ñame"]))
    return f"{thought}<function={name}>{body}{close}"


@settings(max_examples=2500, deadline=None)
@given(st.one_of(_clean_calls(), _calls(), st.lists(_CALL_PIECES, max_size=24).map("".join)))
def test_fast_call_path_is_the_full_parser(content: str) -> None:
    start = content.find("<function=")
    expected = reference_call(content)
    assert parse_text_call(content) == expected
    if start < 0:
        return
    assert _full_text_call(content, start) == expected
    fast = _fast_text_call(content, start)
    assert fast is None or fast == expected


def test_fast_call_path_reads_the_common_shapes() -> None:
    """The shapes SWE-smith rows hold go through the fast path (and give the full parser's answer)."""
    calls = [
        "I look.\n\n<function=bash>\n<parameter=command>grep -rn 'x' /testbed | head -n 5</parameter>\n</function>",
        "<function=str_replace_editor>\n<parameter=command>view</parameter>\n<parameter=path>/testbed/a.py</parameter>\n</function>",
        "Edit.\n<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n<parameter=path>/a.py</parameter>\n"
        "<parameter=old_str>\nif a < b:\n    return '</p>'\n</parameter>\n<parameter=new_str>\nif a <= b:\n    pass\n</parameter>\n</function>",
        "<function=submit>\n<parameter=x>1</parameter>",  # no closing tag: the call runs to the end
        "<function=bash>\n<parameter=command>ls</parameter>\n<parameter=command>pwd</parameter>\n</function>",  # a later name wins
    ]
    for content in calls:
        start = content.find("<function=")
        fast = _fast_text_call(content, start)
        assert fast is not None, content
        assert fast == _full_text_call(content, start) == reference_call(content)
    # and what it does not read, it leaves to the full parser
    for content in (
        "<function=bash>\n<parameter=command>ls</parameter>\n<junk>\n</function>",
        "<function=submit>\n</function>",
        "<function=bash><parameter=command>a</function>b</parameter>",
        "<function=bäsh>\n<parameter=command>ls</parameter>\n</function>",  # a non-ASCII name
    ):
        start = content.find("<function=")
        assert _fast_text_call(content, start) is None
        assert parse_text_call(content) == reference_call(content)
