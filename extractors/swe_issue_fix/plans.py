"""Plans of SWE steps ("I need to ..."), and wrong next plans made by rules from a run's own context.

`condense_plan` turns a step's thought into one grammatical clause: the first sentence stating an
intent, its modal verbs dropped ("I'll need to verify" -> "I need to verify", never "I need to
need to"), sentences split only outside backticks and double quotes (a ':' inside a quoted string
does not end it), never cut inside a quote; thoughts without a usable intent fall back to the
action ("I need to run `grep -n ...`").

`rule_plans` makes wrong next steps for a gold plan in the gold's own wording, each tagged with
its rule (`rule:<kind>`):
- `wrong_target`: the gold's file, function or command target swapped for another one the
  context names (the issue, earlier plans and observations; the most recent first), one target
  or two at once (in a long plan one swapped name is a near copy of the gold), never a file or
  function the resolving patch changes (a plan naming one is no mistake), always one of the
  target's type: a file of the same class (code, doc, config; a script or test for a script or
  test), a function for a function, a class for a class (`name_role`), never a builtin; substitutes
  longer and shorter than the gold's target in turn (so the gold is not the option of one length rank);
- `redundant`: the target swapped for one the run already viewed with its output shown;
- `wrong_order`: the gold's target with the verb of another phase (editing what was not read
  yet, verifying a fix not made yet);
- `premature`: submitting before any patched file was changed.
A candidate equal to any plan of this run, or naming the gold's own target, is never made.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Collection, Iterator, Sequence
from functools import lru_cache
from itertools import zip_longest
from typing import NamedTuple

from schemas import Step

_INTENT = re.compile(
    r"\b(?:let me|let's|let us|i'll|i will|i need to|i should|we need to|we should|i'm going to|"
    r"i am going to|we'll|we will|i want to|we have to|i have to|i must|we must|now,? i)\s+(.*)",
    re.I | re.S,
)
#: Modal and filler words an intent clause may still start with ("need to", "will", "also, ").
_LEAD = re.compile(
    r"^(?:(?:also|first|now|then|next|just|quickly|finally|still|actually|probably|again|really|instead)"
    r"\s*,?\s+|(?:need|have|want|got|going|am going|'m going|try|ought) to\s+|"
    r"(?:will|shall|should|must|can|could|would|might|may|'ll|do)\s+|go ahead and\s+)+",
    re.I,
)
#: Clause starts that are no action (beliefs, findings, states): "I think the bug is ...".
_NOT_ACTION = re.compile(
    r"^(?:think|believe|suspect|guess|know|understand|am|was|were|have|had|has|is|are|be|been|"
    r"notice|noticed|found|realize|realise|realized|realised|wonder|hope|feel|agree|confirmed|did|"
    r"see that|see the (?:problem|issue|bug)|see it|see now|need the|need a|need an|not|no)\b",
    re.I,
)
_VAGUE = re.compile(r"^I need to (?:try|do|run|check) (?:that|this|it)(?: again| once more)?$", re.I)
_MARKUP = re.compile(r"^#+\s.*$|`{3}.*?`{3}", re.M | re.S)
MAX_CLAUSE = 200
#: How much of the end of the context counts as what the model read last.
TAIL_CHARS = 2000


def sentences(text: str) -> Iterator[str]:
    """Sentences of `text`: split after `.!?:` + space and at newlines, never inside `...` or "..."."""
    start, tick, quote = 0, False, False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "`":
            tick = not tick
        elif c == '"' and not tick:
            quote = not quote
        elif c == "\n" or (
            c in ".!?:" and not tick and not quote and i + 1 < len(text) and text[i + 1] in " \t\n"
        ):
            yield text[start : i + 1]
            start = i + 1
            tick = quote = False  # a newline ends any quote; elsewhere none was open
        i += 1
    if start < len(text):
        yield text[start:]


def balanced(text: str) -> bool:
    """Backticks and double quotes come in pairs (a clause cut inside a quote is not)."""
    return text.count("`") % 2 == 0 and text.replace("`", "").count('"') % 2 == 0


def _cut(clause: str) -> str | None:
    """The clause within `MAX_CLAUSE` chars, cut at a comma or " and " outside quotes; None if impossible."""
    if len(clause) <= MAX_CLAUSE:
        return clause
    for m in sorted(re.finditer(r",| and ", clause[:MAX_CLAUSE]), key=lambda m: -m.start()):
        head = clause[: m.start()].rstrip(" ,")
        if len(head) > 40 and balanced(head):
            return head
    return None


_DANGLING = re.compile(
    r"\b(?:to|with|for|and|or|the|a|an|that|as|in|of|by|on|at|from|into|like|so|but|is|are|be|if|than)$", re.I
)


def _clean_clause(clause: str) -> str | None:
    clause = re.sub(r"\s+", " ", clause.strip()).rstrip(".:!;,")
    clause = _LEAD.sub("", clause)
    if not clause or _NOT_ACTION.match(clause) or not balanced(clause):
        return None
    clause = _cut(clause)
    if clause is None or _DANGLING.search(clause):  # "change it to" (its object was cut off at a ':')
        return None
    return clause


def plan_from_action(step: Step) -> str:
    """The plan of a step with no stated intent, from its action."""
    if step.action is None:
        return ""
    a = step.action
    raw = a.raw.strip().splitlines()[0] if a.raw.strip() else a.tool
    if a.tool == "str_replace_editor" or raw.startswith("str_replace_editor"):
        parts = raw.split()
        verb = {
            "view": "view",
            "create": "create",
            "str_replace": "edit",
            "insert": "edit",
            "undo_edit": "revert the edit to",
        }
        if len(parts) >= 3:
            return f"I need to {verb.get(parts[1], parts[1])} {parts[2]}"
    if a.tool in {"submit", "finish"} or raw == "submit":
        return "I need to submit the changes"
    if a.tool in {"open", "create"} and len(raw.split()) > 1:
        return f"I need to {a.tool} {raw.split()[1]}"
    if a.tool == "edit":
        return "I need to edit the open file"
    made = re.match(r"^\s*(?:cd \S+ && )?cat\s+<<-?\s*['\"]?\w+['\"]?\s*>\s*(\S+)\s*$", raw)
    if made is not None:  # mini-swe-agent writes files with a heredoc
        return f"I need to create `{made.group(1)}`"
    if "`" in raw:
        return "I need to run a shell command"
    short = raw if len(raw) <= 80 else raw[:77] + "..."
    return f"I need to run `{short}`"


def condense_plan(step: Step) -> str:
    """Turn a step's thought into an "I need to ..." plan (from the action when no intent is stated)."""
    thought = _MARKUP.sub(" ", step.thought or "")
    for sentence in sentences(thought):
        m = _INTENT.search(sentence)
        if m:
            clause = _clean_clause(m.group(1))
            if clause and len(clause.split()) >= 2:
                return "I need to " + clause[0].lower() + clause[1:]
    return plan_from_action(step)


def is_vague(plan: str) -> bool:
    """A plan that says nothing checkable ("I need to try that again")."""
    return bool(_VAGUE.match(plan))


# --- rule-made wrong plans -------------------------------------------------------------------

_TICKED = re.compile(r"`([^`\n]{2,80})`")
_PATH = re.compile(
    r"(?<![\w/.`-])(/?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z]{1,5}|[\w-]+\.(?:py|rst|cfg|toml|ini|txt|c|h|js))\b"
)
_DEF = re.compile(r"^\s*(?:\d+[\t:]\s*)?(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)
_EXPLORE = re.compile(
    r"^(?:look(?: closer| more closely)?(?: at| into| for)?|view|read|inspect|examine|see|find|search(?: for)?|"
    r"check|open|locate|print|grep(?: for)?|investigate|study|review|understand|explore)\b",
    re.I,
)
_EDIT = re.compile(
    r"^(?:modify|edit|fix|update|change|patch|apply|add|remove|replace|rewrite|implement|insert)\b", re.I
)
_VERIFY = re.compile(
    r"^(?:verify|test|confirm|validate|re-?run|rerun|run the tests?|run the reproduction)\b", re.I
)
#: Verb phrases that replace another phase's verb (`wrong_order`), by the gold's phase.
_OTHER_PHASE = {"explore": ("modify", "update", "change"), "edit": ("verify", "test", "check")}
_PREMATURE = (
    "submit the changes",
    "submit the fix",
    "finalize and submit the patch",
    "submit the current changes as the final patch",
)


def _phase_verbs(plans: Sequence[str], phase: str) -> list[str]:
    """The verbs this run itself uses for `phase` ("modify", "update"...), most frequent first."""
    pattern = _EDIT if phase == "edit" else _VERIFY
    found: dict[str, int] = {}
    for p in plans:
        m = pattern.match(p.removeprefix("I need to "))
        if m is not None:
            verb = m.group(0).lower()
            found[verb] = found.get(verb, 0) + 1
    return sorted(found, key=lambda v: -found[v])[:3]


class RulePlan(NamedTuple):
    """A wrong plan and the rule that made it (`wrong_target`, `redundant`, `wrong_order`, `premature`)."""

    text: str
    kind: str


#: File extensions by what the file holds: a wrong target file is one of the same class (a function
#: is looked for in another code file, never in `CHANGELOG.rst`; a doc page is swapped for a doc page).
FILE_CLASSES = {
    "code": ("py", "pyx", "pyi", "c", "h", "cc", "cpp", "js", "ts", "sh", "bat"),
    "doc": ("rst", "md", "txt", "html"),
    "config": ("cfg", "toml", "ini", "json", "yaml", "yml"),
}
_EXT_CLASS = {ext: cls for cls, exts in FILE_CLASSES.items() for ext in exts}


def _kind(entity: str) -> str:
    """`command` (has spaces), `path` (ends in a file extension) or `name` (function, class, module)."""
    if " " in entity.strip():
        return "command"
    if _file_class(entity):
        return "path"
    return "name"


def _file_class(path: str) -> str:
    """`code`, `doc` or `config` (`FILE_CLASSES`) by the file's extension; "" for no known one."""
    m = re.search(r"\.(\w+)$", path)
    return _EXT_CLASS.get(m.group(1), "") if m else ""


def name_role(name: str, text: str) -> str:
    """What a name is, by its shape or the evidence of `text` (the context and the gold): `class`
    (CamelCase, `class Name`), `function` (`name()`, `def name`, a call `name(`), `module` (dotted,
    imported, run with `python -m`, a path's top folder) or "" (a snake_case name never defined or called)."""
    bare = name.removesuffix("()")
    esc = re.escape(bare)
    # Each pattern begins with a literal (the assertions that guard it come after it, looking back
    # over it): the regex engine then scans a long context for that literal instead of trying a
    # match at every position (25x faster on the real runs' 22 KB contexts, the same roles).
    # `(?<![\w.])NAME\(` is `NAME\((?<![\w.]NAME\()`, `\bdef` is `def(?<=\bdef)`, and so on.
    if re.search(rf"class(?<=\bclass)\s+{esc}\b", text) or re.match(r"_*[A-Z][a-z]", bare.rsplit(".", 1)[-1]):
        return "class"  # a CamelCase call makes an instance: still a class
    if (
        name.endswith("()")
        or re.search(rf"def(?<=\bdef)\s+{esc}\b", text)
        or re.search(rf"{esc}\((?<![\w.]{esc}\()", text)
    ):
        return "function"
    if "." in bare or any(
        re.search(pattern, text)
        for pattern in (
            rf"import(?<=\bimport)\s+{esc}\b",
            rf"from(?<=\bfrom)\s+{esc}\b",
            rf"-m(?<!\S-m)\s+{esc}\b",
            rf"{esc}/(?<![\w./-]{esc}/)[\w.-]+/",
        )
    ):
        return "module"  # dotted, imported, run with `python -m`, or the top folder of a path
    return ""


def _same_role(old: str, new: str) -> bool:
    """A name of role `new` may stand for one of role `old`: the same role, or a function for a name
    the context never shows defined or called (a function only ever for a function)."""
    return old == new or (old == "" and new == "function")


_NAME_OK = re.compile(r"^[A-Za-z_][\w.]*[\w)](?:\(\))?$")
_NOT_NAMES = frozenset(keyword.kwlist) | {
    "self",
    "cls",
    "args",
    "kwargs",
    "sed",
    "grep",
    "cat",
    "python",
    "python3",
    "git",
}
_BUILTINS = frozenset(dir(builtins))
_PATH_OK = re.compile(r"^[\w./-]+$")
_SCRIPT = re.compile(
    r"(?:^|/)(?:test|tests|repro|reproduce|check|verify|debug|demo|example)[^/]*\.(?:py|sh)$|(?:^|/)tests?/",
    re.I,
)


def entities(text: str) -> list[str]:
    """Backticked spans, bare file paths and defined names of `text`, in order of appearance."""
    return list(_entities(text))


@lru_cache(maxsize=4096)
def _entities(text: str) -> tuple[str, ...]:
    """`entities`, memoised: `rule_plans` reads every earlier text of a run again for each of its
    plan steps (on the real SWE runs, 54,604 calls on 1,687 distinct texts: 3.4 of the extract
    stage's 5.7 s). One of `flows.memory.TEXT_CACHES`, emptied between stages."""
    found = [m.group(1) for m in _TICKED.finditer(text)]
    found += [m.group(1) for m in _PATH.finditer(_TICKED.sub(" ", text))]
    found += [m.group(1) for m in _DEF.finditer(text)]
    out = []
    for e in dict.fromkeys(e.strip() for e in found if e.strip()):
        kind = _kind(e)
        name_ok = kind == "name" and _NAME_OK.match(e) and len(e) >= 3 and e not in _NOT_NAMES
        path_ok = kind == "path" and _PATH_OK.match(e) and not e.startswith(("a/", "b/"))  # diff headers
        if name_ok or path_ok or kind == "command":
            out.append(e)
    return tuple(out)


def _shape(name: str) -> str:
    """Rough shape of an identifier: call, dotted, CamelCase, snake_case or lower."""
    if name.endswith("()"):
        return "call"
    if "." in name:
        return "dotted"
    if name[:1].isupper():
        return "camel"
    return "snake" if "_" in name else "lower"


def _same_thing(a: str, b: str) -> bool:
    a, b = a.strip("`/ ").lower(), b.strip("`/ ").lower()
    if not a or not b:
        return True
    base_a, base_b = a.rsplit("/", 1)[-1], b.rsplit("/", 1)[-1]
    return a == b or a.endswith("/" + b) or b.endswith("/" + a) or base_a == base_b or a in b or b in a


def _phase(clause: str) -> str | None:
    for name, pattern in (("verify", _VERIFY), ("explore", _EXPLORE), ("edit", _EDIT)):
        if pattern.match(clause):
            return name
    return None


def _styled(old: str, new: str) -> str:
    """`new` written the way `old` is: relative when `old` is (`/testbed/pkg/a.py` -> `pkg/a.py`)."""
    if old.startswith("/") or not new.startswith("/"):
        return new
    top = old.removeprefix("./").split("/", 1)[0]
    at = new.find("/" + top + "/") if "/" in old else -1
    return new[at + 1 :] if at >= 0 else new.removeprefix("/testbed/")


def _swap(gold: str, old: str, new: str) -> str:
    """`gold` with its first mention of `old` replaced by `new` (backticks kept as they were)."""
    return gold.replace(old, _styled(old, new), 1)


def _substitutes(
    target: str,
    own: Sequence[str],
    recent: Sequence[str],
    done: Sequence[str],
    tail: str,
    runs: bool,
    right: Collection[str] = (),
    text: str = "",
) -> tuple[str, list[tuple[str, str]]] | None:
    """What to swap in `target` (the path a command names, or the target itself) and its substitutes,
    each `(kind, entity)`: files the run already viewed (`redundant`) first, then other entities of
    the context (`wrong_target`), never two naming one file nor one of `right` (what the resolving
    patch changes: a plan naming it is no wrong plan), each of the target's own type: a file of the
    same class (`FILE_CLASSES`; a script or test only for a script or test, a source file only for a
    source file), a name of the same role (`name_role` in
    `text`, the context and the gold); None when there is nothing to swap."""
    kind = _kind(target)
    old = target
    if kind == "command":  # swap the file a command names: `python3 test_a.py` -> `python3 test_b.py`
        paths = [w for w in target.split() if _kind(w) == "path"]
        if not paths:
            return None
        old, kind = paths[0], "path"

    script = kind == "path" and (runs or _SCRIPT.search(old) is not None)
    role = name_role(old, text) if kind == "name" else ""
    roles: dict[str, str] = {}

    def fits(e: str) -> bool:
        if _kind(e) != kind or any(_same_thing(e, t) for t in (*own, *right)) or _same_thing(e, old):
            return False
        if kind == "path":
            return _file_class(e) == _file_class(old) and script == (_SCRIPT.search(e) is not None)
        if e.removesuffix("()") in _BUILTINS:  # `list` for `_print_dict` reads as no plan at all
            return False
        if e not in roles:
            roles[e] = name_role(e, text)
        return _same_role(role, roles[e])

    pool = [e for e in recent if fits(e)]
    # names as frequent as the gold's in the freshest context first: a swap then changes no
    # option's lexical closeness to what the model just read
    own_count = tail.count(old)
    pool.sort(
        key=lambda e: (
            own_count > 0 and tail.count(e) == 0,
            kind == "name" and _shape(e) != _shape(old),
            abs(tail.count(e) - own_count),
        )
    )
    used: list[str] = []  # two substitutes naming one file (`client.py`, `pkg/client.py`) are one option

    def fresh(e: str) -> bool:
        if any(_same_thing(e, u) for u in used):
            return False
        used.append(e)
        return True

    subs = [("redundant", v) for v in done if fits(v) and fresh(v)][:3]
    # longer and shorter substitutes in turn: the options' lengths then fall on both sides of the gold's
    pool = [v for v in pool if fresh(v)]
    longer = [v for v in pool if len(_styled(old, v)) > len(old)]
    shorter = [v for v in pool if len(_styled(old, v)) <= len(old)]
    turns = [v for pair in zip_longest(longer, shorter) for v in pair if v is not None]
    subs += [("wrong_target", v) for v in turns][:6]
    return old, subs


def _double_swaps(gold: str, swaps: Sequence[tuple[str, list[tuple[str, str]]]]) -> Iterator[tuple[str, str]]:
    """`gold` with two of its targets swapped at once (`(text, kind)`): in a long plan one swapped
    name leaves an option the near-duplicate gate calls a copy of the gold, two do not."""
    if len(swaps) < 2:
        return
    (old_a, subs_a), (old_b, subs_b) = swaps[0], swaps[1]
    at_a, at_b = gold.find(old_a), gold.find(old_b)
    if at_a < 0 or at_b < 0 or (at_a <= at_b < at_a + len(old_a)) or (at_b <= at_a < at_b + len(old_b)):
        return
    pairs = [(a, b) for k, a in enumerate(subs_a) for b in subs_b[k : k + 2]]
    for (kind_a, a), (kind_b, b) in pairs:
        if _same_thing(a, b):
            continue
        first, second = sorted([(at_a, old_a, a), (at_b, old_b, b)], reverse=True)  # the later one first
        text = gold
        for at, old, new in (first, second):
            text = text[:at] + _styled(old, new) + text[at + len(old) :]
        yield text, ("redundant" if kind_a == kind_b == "redundant" else "wrong_target")


def rule_plans(
    gold: str,
    context: Sequence[str],
    viewed: Sequence[str],
    run_plans: Sequence[str],
    edited_yet: bool,
    right: Collection[str] = (),
) -> list[RulePlan]:
    """Wrong next plans for `gold` from the run's own context (see the module docstring).

    `context`: texts before the gold step, oldest first (issue, plans, observations); `viewed`:
    targets the run already displayed; `run_plans`: every plan of this run (never reproduced);
    `edited_yet`: a patched file was already changed before this step; `right`: the files and
    functions the resolving patch changes (never swapped in: naming them is no mistake).
    """
    if not gold.startswith("I need to "):
        return []
    clause = gold.removeprefix("I need to ")
    own = entities(gold)
    targets = [e for e in own if e in gold]
    taken = {p.strip().lower() for p in run_plans} | {gold.strip().lower()}
    out: list[RulePlan] = []

    def add(text: str, kind: str) -> None:
        key = text.strip().lower()
        if key not in taken and balanced(text) and len(text.split()) >= 4:
            taken.add(key)
            out.append(RulePlan(text, kind))

    recent: list[str] = []
    for text in reversed(context):  # most recent mention first
        for e in entities(text):
            if e not in recent:
                recent.append(e)
    done = [v for v in reversed(viewed) if v]
    runs = clause.lower().startswith(("run ", "execute ", "rerun ", "re-run "))
    tail = "\n".join(context)[-TAIL_CHARS:]
    text = "\n".join([*context, gold])
    swaps = [
        s
        for t in targets[:3]
        if (s := _substitutes(t, own, recent, done, tail, runs, right, text)) is not None
    ]
    for old, subs in swaps[:2]:
        for kind, e in subs:
            add(_swap(gold, old, e), kind)
    for text, kind in _double_swaps(gold, swaps):
        add(text, kind)
    phase = _phase(clause)
    if phase in _OTHER_PHASE and not (phase == "explore" and edited_yet):
        verb = (_EXPLORE if phase == "explore" else _EDIT if phase == "edit" else _VERIFY).match(clause)
        assert verb is not None
        rest = clause[verb.end() :].strip()
        first = rest.split(" ", 1)[0].lower()
        simple = len(rest.split()) <= 6 and not re.search(
            r"\b(?:to|and|if|whether|how|why|what|where)\b", rest
        )
        if simple and (rest.startswith("`") or first in {"the", "a", "an", "its", "this", "that"}):
            for new in _OTHER_PHASE[phase]:
                add(f"I need to {new} {rest}", "wrong_order")
    if not edited_yet:  # one wording per gold, so no phrase recurs across a task's items
        add(f"I need to {_PREMATURE[sum(map(ord, gold)) % len(_PREMATURE)]}", "premature")
    return out
