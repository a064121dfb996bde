"""A deterministic instance of a JSON schema, seeded by the request: the stand-in's structured replies."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any


def _sub_seed(seed: str, key: object) -> str:
    """Derives the seed of a nested schema node from its parent's seed."""
    return hashlib.sha256(f"{seed}/{key}".encode()).hexdigest()


def schema_instance(schema: Mapping[str, Any], seed: str = "0" * 64) -> Any:
    """Builds a deterministic JSON value that satisfies a (simple) JSON schema.

    Supports ``type`` (including lists), ``properties``, ``items``, ``enum``,
    ``const``, ``anyOf``/``oneOf``/``allOf`` (first branch), local ``$ref``
    (``#/$defs/...``), ``minItems``/``maxItems``, ``minimum``/``maximum``,
    ``minLength``/``maxLength`` and a few string ``format`` values.  Every
    declared property is emitted, as OpenAI strict mode requires.

    Args:
        schema: The JSON schema.
        seed: Hex string that makes the values vary deterministically.

    Returns:
        A JSON-serialisable value.
    """
    return _instance(schema, seed, schema, 0)


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Resolves a local JSON pointer such as ``#/$defs/Item`` against the root schema."""
    node: Any = root
    if not ref.startswith("#"):
        return {}
    for token in ref.lstrip("#").strip("/").split("/"):
        if not token:
            continue
        token = token.replace("~1", "/").replace("~0", "~")
        node = node.get(token, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, Mapping) else {}


def _instance(schema: Any, seed: str, root: Mapping[str, Any], depth: int) -> Any:
    """Recursive worker of :func:`schema_instance`."""
    if not isinstance(schema, Mapping):
        return None
    if "$ref" in schema:
        return _instance(_resolve_ref(schema["$ref"], root), seed, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = list(schema["enum"])
        return options[int(seed[:8], 16) % len(options)]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, Mapping)]
        if branches:
            non_null = [b for b in branches if b.get("type") != "null"] or branches
            return _instance(non_null[0], seed, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    number = int(seed[:8], 16)
    if kind == "object":
        properties = schema.get("properties") or {}
        names = list(properties)
        if depth > 6:  # keep recursive schemas finite
            names = [n for n in names if n in set(schema.get("required") or [])]
        return {name: _instance(properties[name], _sub_seed(seed, name), root, depth + 1) for name in names}
    if kind == "array":
        count = int(schema.get("minItems", 0 if depth > 6 else 1))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [
            _instance(schema.get("items") or {}, _sub_seed(seed, i), root, depth + 1) for i in range(count)
        ]
    if kind == "integer":
        low = schema.get(
            "minimum", schema.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in schema else 0
        )
        high = schema.get(
            "maximum", schema.get("exclusiveMaximum", 0) - 1 if "exclusiveMaximum" in schema else None
        )
        low = int(low)
        high = int(high) if high is not None else low + 99
        return low + number % max(1, high - low + 1)
    if kind == "number":
        low = float(schema.get("minimum", schema.get("exclusiveMinimum", 0.0)))
        high = float(schema.get("maximum", schema.get("exclusiveMaximum", low + 100.0)))
        value = low + (number % 10_000) / 10_000 * (high - low)
        return value if value > low or "exclusiveMinimum" not in schema else (low + high) / 2
    if kind == "boolean":
        return number % 2 == 0
    if kind == "null":
        return None
    fmt = schema.get("format")
    fixed = {
        "date-time": "2024-01-01T00:00:00Z",
        "date": "2024-01-01",
        "time": "00:00:00",
        "email": f"user-{seed[:6]}@example.com",
        "uri": f"https://example.com/{seed[:8]}",
        "uuid": str(uuid.UUID(seed[:32])),
    }
    if fmt in fixed:
        return fixed[fmt]
    text = f"value-{seed[:8]}"
    min_length, max_length = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(text) < min_length:
        text = (text * (min_length // len(text) + 1))[:min_length]
    if max_length is not None:
        text = text[: int(max_length)]
    return text
