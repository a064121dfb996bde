"""Versioned prompt files for LLM distractors, chosen per (scenario, task) by file name.

Why: a new scenario or task only adds a prompt file; changing a prompt means a new file (a new
version), never an edit in place; the file's SHA-256 goes into every item's provenance.

Files are `<scenario>.<task>.v<N>.md.j2` in each scenario package's `prompts/` folder, plus this
package's own `prompts/` (`LLM_PROMPTS`: prompts of the LLM layer itself, e.g. the answer judge's
`judge.answer`); the flows pass the folders in. The highest N wins unless a version is pinned. A file opens with a Jinja comment saying what it is for, then has a `=== system ===` and a
`=== user ===` section. The sections are split *before* rendering, so trajectory text can never
forge one. Template variables: `step` (the GoldStep), `gold`, `fields` (the item's context fields),
`n` (distractors wanted) and `budget` (characters the context may take). Filters: `fromjson`,
`tojson`, `transcript` (a message list as readable text) and `truncate_middle(limit)`.
Rendering is pure: the same step, count and budget always give the same prompt (and request key).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas import GoldStep
from schemas.text import truncate_middle

LLM_PROMPTS = Path(__file__).parent / "prompts"
"""Prompt files of the LLM layer itself (not of a scenario): the answer judge's."""

_NAME = re.compile(r"^(?P<scenario>[A-Za-z0-9_-]+)\.(?P<task>[A-Za-z0-9_]+)\.v(?P<version>\d+)\.md\.j2$")
_SECTION = re.compile(r"^=== (system|user) ===[ \t]*$", re.M)


class PromptError(ValueError):
    """A prompt file that cannot be used (bad name, missing section, template syntax)."""


class PromptTemplate(NamedTuple):
    """One versioned prompt file, compiled."""

    scenario: str
    task: str
    version: int
    name: str
    """File name, e.g. `swe_issue_fix.plan.v1.md.j2`."""
    sha256: str
    """SHA-256 of the file's bytes (`Provenance.prompt_hash`)."""
    system: jinja2.Template
    user: jinja2.Template


class Prompt(NamedTuple):
    """A rendered prompt."""

    system: str
    user: str
    template: str
    """Template file name."""
    prompt_hash: str
    """SHA-256 of the template file."""


def _cut_for_prompt(text: str, limit: int) -> str:
    """The `truncate_middle` filter of templates: a third of `limit` from the start, the rest from the end."""
    return truncate_middle(text, limit, head=limit // 3)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def transcript(messages: Any) -> str:
    """A chat message list as `[role] text` paragraphs (plans as `[assistant plan] ...`).

    Entries without a `role` (e.g. deep-research steps) are shown as compact JSON.
    """
    if not isinstance(messages, list):
        return _text_of(messages)
    out = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            out.append(json.dumps(m, ensure_ascii=False))
            continue
        role = str(m["role"])
        if "plan" in m:
            out.append(f"[{role} plan] {m['plan']}")
        elif "thought" in m and not m.get("content"):
            out.append(f"[{role} thought] {m['thought']}")
        else:
            out.append(f"[{role}] {_text_of(m.get('content'))}")
    return "\n\n".join(out)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(
        fromjson=json.loads,
        transcript=transcript,
        truncate_middle=_cut_for_prompt,
        tojson=lambda v: json.dumps(v, ensure_ascii=False),
    )
    return env


def compile_template(path: Path, env: jinja2.Environment | None = None) -> PromptTemplate:
    """Read and compile one prompt file.

    Raises:
        PromptError: the name, sections or Jinja syntax are wrong (the message names the file).
    """
    match = _NAME.match(path.name)
    if not match:
        raise PromptError(f"{path}: prompt files are named <scenario>.<task>.v<N>.md.j2")
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    parts = _SECTION.split(text)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if set(sections) != {"system", "user"} or len(parts) != 5:
        raise PromptError(f"{path}: needs exactly one `=== system ===` and one `=== user ===` section")
    env = env or _environment()
    try:
        system = env.from_string(sections["system"].strip("\n"))
        user = env.from_string(sections["user"].strip("\n"))
    except jinja2.TemplateSyntaxError as exc:
        raise PromptError(f"{path}:{exc.lineno}: {exc.message}") from exc
    return PromptTemplate(
        match["scenario"],
        match["task"],
        int(match["version"]),
        path.name,
        hashlib.sha256(raw).hexdigest(),
        system,
        user,
    )


class PromptLibrary:
    """The prompt file of each (scenario, task): the highest version unless pinned."""

    def __init__(self, templates: Mapping[tuple[str, str], PromptTemplate]) -> None:
        self._templates = dict(templates)

    @classmethod
    def load(cls, folders: Sequence[str | Path], pins: Mapping[str, int] | None = None) -> PromptLibrary:
        """Compile every prompt file of `folders` (the scenarios' `prompts/` folders).

        Args:
            folders: Folders of `*.md.j2` prompt files.
            pins: `"<scenario>.<task>" -> version` to use instead of the highest.

        Raises:
            PromptError: a file is malformed, or a pinned version does not exist.
        """
        env = _environment()
        found: dict[tuple[str, str], dict[int, Path]] = {}
        for path in sorted(p for folder in folders for p in Path(folder).glob("*.md.j2")):
            match = _NAME.match(path.name)
            if not match:
                raise PromptError(f"{path}: prompt files are named <scenario>.<task>.v<N>.md.j2")
            found.setdefault((match["scenario"], match["task"]), {})[int(match["version"])] = path
        pins = dict(pins or {})
        chosen: dict[tuple[str, str], PromptTemplate] = {}
        for (scenario, task), versions in found.items():
            version = pins.pop(f"{scenario}.{task}", max(versions))
            if version not in versions:
                raise PromptError(f"{scenario}.{task}: no prompt version {version} (have {sorted(versions)})")
            chosen[(scenario, task)] = compile_template(versions[version], env)
        if pins:
            raise PromptError(f"pinned prompts without any file: {', '.join(sorted(pins))}")
        return cls(chosen)

    def get(self, scenario: str, task: str) -> PromptTemplate | None:
        """The template of a task, or None."""
        return self._templates.get((scenario, task))

    def names(self) -> list[str]:
        """File names in use."""
        return sorted(t.name for t in self._templates.values())


def render(template: PromptTemplate, step: GoldStep, n: int, budget: int) -> Prompt:
    """Render a template for one gold step (pure)."""
    values = {"step": step, "gold": step.gold, "fields": step.fields, "n": n, "budget": budget}
    return Prompt(
        template.system.render(values).strip(),
        template.user.render(values).strip(),
        template.name,
        template.sha256,
    )


def with_repair_note(prompt: Prompt, detail: str) -> Prompt:
    """The prompt of a second attempt: the first reply's problem appended to the user message."""
    note = (
        f"\n\nYour previous reply could not be used: {detail}\n"
        "Reply again, following every rule above, with the JSON object only."
    )
    return prompt._replace(user=prompt.user + note)


class WrongOption(BaseModel):
    """One wrong option of a reply."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    kind: str = Field("", description="error family of this wrong option")
    text: str = Field(description="the wrong option, in the gold's format")

    @model_validator(mode="before")
    @classmethod
    def _bare_text(cls, data: Any) -> Any:
        """A bare string is an option without a family; a JSON step given as an object is serialised."""
        if isinstance(data, str):
            return {"text": data}
        if isinstance(data, dict) and isinstance(data.get("text"), dict):
            return {**data, "text": json.dumps(data["text"], ensure_ascii=False)}
        return data


class DistractorReply(BaseModel):
    """The structured reply of an LLM generator: `{"distractors": [{"kind": ..., "text": ...}, ...]}`.

    `model_json_schema()` (inlined, strict-mode safe) is the schema the request asks for; the reply is
    validated by this model (a bare list of options is accepted as the `distractors`).
    """

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    distractors: list[WrongOption]

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, data: Any) -> Any:
        return {"distractors": data} if isinstance(data, list) else data


def _inline(schema: Any, defs: Mapping[str, Any]) -> Any:
    """`schema` with `$ref`s inlined, titles and model docstrings dropped (what providers' strict modes take)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        drop = {"title", "$defs", "default"} | ({"description"} if "properties" in schema else set())
        return {k: _inline(v, defs) for k, v in schema.items() if k not in drop}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


@lru_cache(maxsize=1)
def _distractor_schema_json() -> bytes:
    schema = DistractorReply.model_json_schema(mode="serialization")
    return orjson.dumps(_inline(schema, schema.get("$defs", {})))


def distractor_schema() -> dict[str, Any]:
    """JSON schema of a reply, from `DistractorReply` (every property required, no extra keys).

    A fresh copy of a schema made once: pydantic's schema generation costs about 0.8 ms, 90% of
    building a request, and ran for every one (on the critical path of the first requests in flight)."""
    return orjson.loads(_distractor_schema_json())


__all__ = [
    "LLM_PROMPTS",
    "DistractorReply",
    "Prompt",
    "PromptError",
    "PromptLibrary",
    "PromptTemplate",
    "WrongOption",
    "compile_template",
    "distractor_schema",
    "render",
    "transcript",
    "truncate_middle",
    "with_repair_note",
]
