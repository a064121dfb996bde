"""The words of rule-made deep-research steps: tool-name and argument near misses, planning openers.

Shared by the wrong-step families (`wrong_steps`) and the `dr` extractor. Everything here is
data or a pure function of its arguments; the planning openers and the completion phrases are the
ones real InfoDeepSeek agents use in APTBench's rows ("Search for", "Find", "搜索", "查找",
"Terminate planning as ...", "结束任务"), so a rule-made step does not stand out by its words; no
near-miss name carries a flaw marker (`web_search_wrong`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import urlparse

#: Tools that end a run. A completion with arguments carries the answer.
COMPLETION_TOOLS = frozenset(
    {
        "task_complete",
        "complete_task",
        "finish",
        "final_answer",
        "answer",
        "gaia_answer",
        "submit",
        "stop",
        "done",
        "terminate",
    }
)
SEARCH_KEYS = ("text", "query", "q", "search_query", "queries")
URL_KEYS = ("url", "link", "urls")
GOAL_KEYS = ("question", "goal", "fact_description", "instruction")

#: Near-miss names: real-looking, never marked as wrong. Tried in order, skipping real tools.
_TOOL_MISSES = {
    "web_search": ("search_web", "websearch", "google_search", "internet_search", "web_serach", "search"),
    "browse_website": (
        "browse_web",
        "visit_website",
        "open_website",
        "browse_page",
        "browse_webpage",
        "browse",
    ),
    "task_complete": ("complete_task", "finish_task", "end_task"),
    "search": ("web_search", "search_web", "find"),
    "read_document": ("read_page", "open_document", "read_url"),
    "open_url": ("open_page", "visit_url", "browse_url"),
    "visit": ("browse", "open_page"),
    "python_code": ("run_python", "execute_code", "python"),
}
ARG_MISSES = {
    "text": ("query", "query_text", "keywords", "search_text", "q", "content"),
    "query": ("search_query", "text", "keywords"),
    "q": ("query", "search"),
    "url": ("link", "website", "page_url", "address", "uri"),
    "question": ("query", "goal", "topic", "prompt", "task"),
    "goal": ("question", "purpose"),
    "code": ("script", "source"),
    "fact_description": ("description", "fact"),
}
STOCK_COMPLETE = {
    "en": (
        "Terminate planning as sufficient information is available.",
        "Indicate task completion as the necessary information has been gathered.",
        "Terminate planning as the query has been answered.",
    ),
    "zh": ("结束任务", "结束规划", "结束任务并回答问题", "任务完成"),
}
#: Openers of real agents' planning (APTBench rows: "Find the", "Search for", "搜索", "查找", "Verify the"...).
_SEARCH_FORMS = {
    "en": ("Search for {q}.", "Find information about {q}.", "Find {q}."),
    "zh": ("搜索{q}", "查找{q}"),
}
_BROWSE_FORMS = {
    "en": (
        "Browse the {host} page to find: {goal}",
        "Verify on the {host} page: {goal}",
        "Browse {host}: {goal}",
    ),
    "zh": ("浏览{host}，查找{goal}", "浏览{host}页面，{goal}", "验证{host}页面：{goal}"),
}
_READ_FORMS = {
    "en": ("Browse the {host} page.", "Read the {host} page for details."),
    "zh": ("浏览{host}的页面内容", "查看{host}页面"),
}
_LISTED_URL = re.compile(r"^[ \t]*(?:url:[ \t]*)?(https?://\S+)[ \t]*$", re.M | re.I)
_ASSET = re.compile(
    r"login|signin|/cdn-cgi/|\.(?:png|jpe?g|gif|svg|css|js|ico|woff2?)(?:\?|$)|[?&]utm_", re.I
)
# fmt: off
STOPWORDS = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is", "are",
    "was", "were", "be", "been", "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
    "did", "does", "do", "that", "this", "these", "those", "as", "it", "its", "into", "than", "then",
))
# fmt: on
def call(name: str, args: dict[str, Any], planning: str) -> dict[str, Any]:
    """An APTBench step object (key order as in APTBench rows)."""
    return {"planning": planning, "execution": {"name": name, "args": args}}


def search_key(args: dict[str, Any]) -> str | None:
    """The argument holding a search query, if the call is a search."""
    return next((k for k in SEARCH_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)


def url_key(args: dict[str, Any]) -> str | None:
    """The argument holding a URL, if the call opens a page."""
    return next((k for k in URL_KEYS if isinstance(args.get(k), str) and args[k].startswith("http")), None)


def host(url: str) -> str:
    host = urlparse(url).netloc
    return host.removeprefix("www.") or url


def plain_planning(name: str, args: dict[str, Any], lang: str, rng: random.Random) -> str | None:
    """Planning that restates a search or browse call in the agents' own openers; None for other calls."""
    sk, uk = search_key(args), url_key(args)
    if sk:
        q = args[sk].strip().rstrip(".?!。？")
        forms = _SEARCH_FORMS[lang]
        return forms[rng.randrange(len(forms))].format(q=q)
    if uk:
        goal = next(
            (args[k].strip() for k in GOAL_KEYS if isinstance(args.get(k), str) and args[k].strip()), ""
        )
        forms = _BROWSE_FORMS[lang] if goal else _READ_FORMS[lang]
        return forms[rng.randrange(len(forms))].format(host=host(args[uk]), goal=goal.rstrip(".。"))
    return None


def near_miss(name: str, taken: frozenset[str], rng: random.Random) -> str | None:
    misses = list(_TOOL_MISSES.get(name, ()))
    parts = name.split("_")
    if len(parts) > 1:
        misses += ["_".join(reversed(parts)), "".join(parts)]
    elif len(name) > 4:
        i = rng.randrange(1, len(name) - 2)
        misses.append(name[:i] + name[i + 1] + name[i] + name[i + 2 :])  # one transposition
    misses = [m for m in dict.fromkeys(misses) if m != name and m not in taken]
    return misses[rng.randrange(len(misses))] if misses else None


def vague_query(query: str, lang: str) -> str:
    """The first half (at most 3) of a query's content words: a generic, unfocused search."""
    words = query.split()
    if lang == "en":
        words = [w for w in words if w.casefold().strip("\"'?,.") not in STOPWORDS]
    if len(words) >= 2:
        return " ".join(words[: min(3, (len(words) + 1) // 2)])
    if lang == "zh" and len(query) >= 6:
        return query[: max(2, len(query) // 3)]
    return ""


class Listed(NamedTuple):
    """A search result listed in an observation."""

    url: str
    title: str
    block: str
    """Its title, snippet and URL lines."""


def listed(text: str) -> Iterator[Listed]:
    """Each URL on a line of its own (a search result: `url: ...` or a bare URL), page assets skipped."""
    prev = 0
    matches = list(_LISTED_URL.finditer(text))
    for k, m in enumerate(matches):
        stop = matches[k + 1].start() if k + 1 < len(matches) else len(text)
        nxt = text[m.end() : stop].lstrip("\n").split("\n", 1)[0]
        block = text[prev : m.start()] + (nxt if not nxt.lower().startswith("title:") else "")
        prev = m.end()
        url = m.group(1).rstrip(".,;")
        if _ASSET.search(url):
            continue
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        title = lines[0].removeprefix("title:").strip() if lines else ""
        yield Listed(url, title, block)
