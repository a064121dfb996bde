"""Distractor generators (offline and LLM), quality gates and model-free baselines.

Generators turn GoldSteps into Questions. They are pure over schema objects; an LLM generator
splits into a pure `build_prompt()` and a pure `parse()` with the client call between them.
"""
