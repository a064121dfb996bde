"""The one base class every aptforge schema derives from.

Models are frozen and refuse unknown fields, so a record that leaves one stage cannot be
mutated by the next, and a typo in a field name fails loudly instead of being dropped.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Frozen, strict pydantic base model (attribute docstrings become field descriptions)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
