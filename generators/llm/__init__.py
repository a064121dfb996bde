"""LLM distractor generators: the engine (limiter, retries, cache, ledger, budget), batch, clients,
prompting and the providers (OpenAI, Anthropic, OpenAI-compatible).

`build_prompt()` and `parse()` are pure; the client call sits between them.
"""
