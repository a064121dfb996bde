"""Distractor generators: `offline` (the embedded default) here, LLM ones in `llm/`.

`quality/` holds the gates, baselines and audit, `hygiene/` secrets, dedup and contamination. All are
pure over schema objects; an LLM generator splits into a pure `build_prompt()` and a pure `parse()`.
"""
