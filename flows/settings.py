"""Secrets and endpoints from the environment, read at the edge, and the LLM generators built from them.

Why: API keys must come only from the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), be read
in one place, when a build starts (never at import), and travel only as arguments into the SDK
clients. They are `SecretStr` here (masked in any repr or log), never part of the build config,
a request body, the response cache, a report or a Problem (details are redacted of them).

`make_llm_generator` picks the generator class by `config.generator.name`, resolves the model
(config, then `APTFORGE_<NAME>_MODEL`, then the class default, then for openai-compatible the
server's first model), the base URL (config, then `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`), and
wires the async SDK client (or the sync one for batch mode), the response cache, the ledger with the
configured prices and budget, and the limiter.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, NamedTuple

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from flows.config import BuildConfig, GeneratorConfig

LLM_GENERATORS = ("openai", "anthropic", "openai-compatible")

#: What openai-compatible servers get as a key when none is set (vLLM, Ollama ... ignore it; the SDK needs one).
PLACEHOLDER_KEY = "not-needed"


class Settings(BaseSettings):
    """What aptforge reads from the environment (and nothing else does)."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=False)

    openai_api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    """Key of the OpenAI API (also sent to an openai-compatible server when set)."""
    openai_base_url: str | None = Field(None, validation_alias="OPENAI_BASE_URL")
    """OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1` (vLLM)."""
    anthropic_api_key: SecretStr | None = Field(None, validation_alias="ANTHROPIC_API_KEY")
    """Key of the Anthropic API."""
    anthropic_base_url: str | None = Field(None, validation_alias="ANTHROPIC_BASE_URL")
    """Anthropic endpoint (without `/v1`)."""
    openai_model: str | None = Field(None, validation_alias="APTFORGE_OPENAI_MODEL")
    """Model of the `openai` generator when the config names none."""
    anthropic_model: str | None = Field(None, validation_alias="APTFORGE_ANTHROPIC_MODEL")
    """Model of the `anthropic` generator when the config names none."""
    openai_compatible_model: str | None = Field(None, validation_alias="APTFORGE_OPENAI_COMPATIBLE_MODEL")
    """Model of the `openai-compatible` generator when the config names none."""


def load_settings() -> Settings:
    """Read the environment now (call it when a build starts, never at import)."""
    return Settings()


#: Seconds the CLI gives Prefect's local (ephemeral) server to start, unless the user set
#: Prefect's own `PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS` (environment or profile). Prefect's
#: default (20 s) is too short for a first start, which also migrates the database, on a busy machine.
PREFECT_STARTUP_TIMEOUT_S = 180


def prefect_startup_timeout() -> int:
    """Start-up time for Prefect's ephemeral server: the user's Prefect setting, else 180 s."""
    from prefect.settings import get_current_settings

    ephemeral = get_current_settings().server.ephemeral
    if "startup_timeout_seconds" in ephemeral.model_fields_set:
        return ephemeral.startup_timeout_seconds
    return PREFECT_STARTUP_TIMEOUT_S


def prefect_needs_local_server() -> bool:
    """True when flows will run on Prefect's ephemeral server (no `PREFECT_API_URL`, ephemeral mode on)."""
    from prefect.settings import get_current_settings

    current = get_current_settings()
    return not current.api.url and current.server.ephemeral.enabled


def generator_problem(config: BuildConfig, settings: Settings | None = None) -> str | None:
    """Why the configured LLM generator cannot start (missing key or endpoint), checked before any stage."""
    return llm_problem(config.generator, settings or load_settings())


def llm_problem(gen: GeneratorConfig, settings: Settings) -> str | None:
    """Why an LLM client with these settings cannot start (missing key or endpoint)."""
    anthropic_side = gen.name == "anthropic"
    secret = settings.anthropic_api_key if anthropic_side else settings.openai_api_key
    base_url = gen.base_url or (settings.anthropic_base_url if anthropic_side else settings.openai_base_url)
    if gen.name in ("openai", "anthropic") and (secret is None or not secret.get_secret_value()):
        return (
            f"generator {gen.name!r} needs {'ANTHROPIC' if anthropic_side else 'OPENAI'}_API_KEY "
            "in the environment"
        )
    if gen.name == "openai-compatible" and not base_url:
        return "generator 'openai-compatible' needs generator.base_url or OPENAI_BASE_URL"
    return None


class LLMParts(NamedTuple):
    """What one LLM client needs: runner (engine or batch), ledger, response store, prompts, model."""

    runner: Any
    ledger: Any
    store: Any
    prompts: Any
    model: str
    structured: str
    provider: str


def llm_parts(
    gen: GeneratorConfig, out_dir: str, settings: Settings, default_model: str | None, provider: str
) -> LLMParts:
    """Wire an SDK client, response cache, ledger (prices, budget) and limiter for `gen` (see the module docstring)."""
    from extractors.discovery import discover_extractors, prompt_dirs
    from generators.llm.batch import AnthropicBatches, BatchRunner, OpenAIBatches
    from generators.llm.clients import AnthropicMessages, OpenAIChat
    from generators.llm.engine import Limiter, LLMEngine
    from generators.llm.ledger import Ledger, Price
    from generators.llm.openai_compatible import discover_model
    from generators.llm.prompting import LLM_PROMPTS, PromptLibrary
    from generators.llm.store import ResponseStore

    anthropic_side = gen.name == "anthropic"
    secret = settings.anthropic_api_key if anthropic_side else settings.openai_api_key
    key = secret.get_secret_value() if secret is not None else ""
    base_url = gen.base_url or (settings.anthropic_base_url if anthropic_side else settings.openai_base_url)
    problem = llm_problem(gen, settings)
    if problem:
        raise ValueError(problem)
    key = key or PLACEHOLDER_KEY
    if anthropic_side:
        import anthropic  # each SDK takes seconds to import: load only the one in use
    else:
        import openai
    client_args: dict[str, Any] = {
        "api_key": key,
        "base_url": base_url,
        "timeout": gen.timeout_s,
        "max_retries": gen.max_retries,
    }
    env_model = {
        "openai": settings.openai_model,
        "anthropic": settings.anthropic_model,
        "openai-compatible": settings.openai_compatible_model,
    }[gen.name]
    model = gen.model or env_model or default_model
    if not model:
        with openai.OpenAI(**client_args) as probe:
            model = discover_model(probe)
    structured = gen.structured_output
    if structured == "auto":
        structured = "tool" if anthropic_side else "json_schema"

    ledger = Ledger(
        {m: Price(p.input, p.output) for m, p in gen.prices.items()}, gen.budget_usd, gen.batch_price_factor
    )
    ledger.require_prices(model)
    prompts = PromptLibrary.load([*prompt_dirs(discover_extractors()), LLM_PROMPTS], pins=gen.prompt_versions)
    store = ResponseStore(gen.cache_file(out_dir))
    if gen.batch:
        api: Any = (
            AnthropicBatches(anthropic.Anthropic(**client_args))
            if anthropic_side
            else OpenAIBatches(openai.OpenAI(**client_args), provider)
        )
        runner: Any = BatchRunner(
            api, store, ledger, poll_s=gen.batch_poll_s, max_wait_s=gen.batch_max_wait_s, secrets=[key]
        )
    else:
        client: Any = (
            AnthropicMessages(anthropic.AsyncAnthropic(**client_args))
            if anthropic_side
            else OpenAIChat(openai.AsyncOpenAI(**client_args))
        )
        runner = LLMEngine(
            client, store, ledger, Limiter(gen.max_concurrency, gen.rpm, gen.tpm), secrets=[key]
        )
    return LLMParts(runner, ledger, store, prompts, model, structured, provider)


_LLM_MODULES = (
    "generators.llm.batch",
    "generators.llm.clients",
    "generators.llm.engine",
    "generators.llm.prompting",
    "generators.llm.store",
    "generators.llm.openai_gen",
    "generators.llm.anthropic_gen",
    "generators.llm.openai_compatible",
)


def prewarm_llm(config: BuildConfig) -> threading.Thread | None:
    """Import the SDK and LLM modules `config` will use on a daemon thread, while the stages before
    generation run: the generate stage then starts sending at once instead of after a second or
    more of imports. None when no LLM generator or judge is configured."""
    names = {config.generator.name, config.judge.generator or ""} & set(LLM_GENERATORS)
    if not names:
        return None
    sdks = (
        ["anthropic"]
        if names == {"anthropic"}
        else ["openai", "anthropic"]
        if "anthropic" in names
        else ["openai"]
    )

    def load() -> None:
        for module in (*sdks, *_LLM_MODULES):
            try:
                importlib.import_module(module)
            except Exception:  # a failing import is raised where the module is used
                continue

    thread = threading.Thread(target=load, name="aptforge-llm-prewarm", daemon=True)
    thread.start()
    return thread


def make_llm_generator(config: BuildConfig, settings: Settings | None = None) -> Any:
    """The LLM generator `config.generator` names, wired to its SDK client, cache, ledger and limiter.

    Raises:
        ValueError: unknown name, missing API key, no model, or a budget without a price for the model.
    """
    from generators.llm.anthropic_gen import AnthropicGenerator
    from generators.llm.openai_compatible import OpenAICompatibleGenerator
    from generators.llm.openai_gen import OpenAIGenerator

    settings = settings or load_settings()
    gen = config.generator
    classes = {
        "openai": OpenAIGenerator,
        "anthropic": AnthropicGenerator,
        "openai-compatible": OpenAICompatibleGenerator,
    }
    if gen.name not in classes:
        raise ValueError(f"unknown LLM generator {gen.name!r}; available: {', '.join(classes)}")
    cls = classes[gen.name]
    parts = llm_parts(gen, config.out_dir, settings, cls.default_model, cls.provider)
    return cls(
        runner=parts.runner,
        ledger=parts.ledger,
        prompts=parts.prompts,
        model=parts.model,
        temperature=gen.temperature,
        max_output_tokens=gen.max_output_tokens,
        max_context_chars=gen.max_context_chars,
        near_duplicate=gen.near_duplicate,
        structured=parts.structured,
        owned=[parts.runner, parts.store],
    )


#: The judge's default model per generator (openai-compatible: the server's first model).
JUDGE_DEFAULT_MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "openai-compatible": None}


def make_llm_judge(config: BuildConfig, settings: Settings | None = None) -> Any:
    """The answer judge `config.judge` names (None when the judge is off)."""
    from generators.llm.judge import AnswerJudge

    judge = config.judge
    if not judge.generator:
        return None
    if judge.generator not in JUDGE_DEFAULT_MODELS:
        raise ValueError(
            f"unknown judge generator {judge.generator!r}; available: {', '.join(JUDGE_DEFAULT_MODELS)}"
        )
    provider = "anthropic" if judge.generator == "anthropic" else "openai"
    if judge.generator == "openai-compatible":
        provider = "openai-compatible"
    gen = judge.as_generator()
    parts = llm_parts(
        gen, config.out_dir, settings or load_settings(), JUDGE_DEFAULT_MODELS[judge.generator], provider
    )
    return AnswerJudge(
        parts.runner,
        parts.ledger,
        parts.prompts,
        model=parts.model,
        provider=provider,
        max_output_tokens=judge.max_output_tokens,
        owned=[parts.runner, parts.store],
    )


__all__ = [
    "LLM_GENERATORS",
    "PREFECT_STARTUP_TIMEOUT_S",
    "LLMParts",
    "Settings",
    "generator_problem",
    "llm_parts",
    "load_settings",
    "make_llm_generator",
    "make_llm_judge",
    "prefect_needs_local_server",
    "prefect_startup_timeout",
]
