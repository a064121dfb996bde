"""Provenance carried by every question and item.

Which raw file and line an item came from, which reader / extractor / generator (and their
versions) made it, with which prompt template, model and seed, and what it cost.
"""

from __future__ import annotations

from schemas.base import Model


class Provenance(Model):
    """Where an item came from and what made it."""

    source_file: str
    """Raw file the trajectory was read from."""
    source_line: int | None = None
    """1-based line or row in that file; None for whole-file records."""
    source_format: str
    """Reader name."""
    reader_version: int = 1
    """Reader version."""
    instance_id: str = ""
    """Task instance id of the run."""
    agent: str = ""
    """Agent framework of the run."""
    agent_model: str = ""
    """Model that drove the agent."""
    outcome_signal: str = ""
    """The verdict signal that made the run count as successful."""
    extractor: str
    """Extractor (scenario) name."""
    extractor_version: int = 1
    """Extractor version."""
    generator: str = ""
    """Distractor generator name (empty for completion tasks)."""
    generator_version: int = 0
    """Distractor generator version."""
    prompt_hash: str = ""
    """Hash of the prompt template used by an LLM generator."""
    model: str = ""
    """Model id of an LLM generator."""
    seed: int = 0
    """Seed of the build."""
    tokens_in: int = 0
    """Prompt tokens spent on this item's distractors."""
    tokens_out: int = 0
    """Completion tokens spent on this item's distractors."""
    cost_usd: float = 0.0
    """Cost of this item's distractors."""
