"""Shared fixtures: the real public data folder, the bundled samples, one Prefect harness per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# huggingface_hub reads these once, at import: set them before any test imports it, so the real
# client talks plain HTTP + LFS to the stand-in Hub and never phones home.
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "0")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "extractors" / "samples"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """`$APTFORGE_SHARED` (the real public runs). Fails, not skips, when set but missing."""
    value = os.environ.get("APTFORGE_SHARED")
    if not value:
        default = ROOT.parent / "shared"
        if default.is_dir():
            return default
        pytest.skip("APTFORGE_SHARED is not set and ../shared does not exist")
    path = Path(value)
    if not path.is_absolute():
        path = (ROOT / path).resolve()
    if not path.is_dir():
        pytest.fail(f"APTFORGE_SHARED={value} is set but {path} is not a folder")
    return path


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """The project's own bundled samples."""
    return SAMPLES


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server for every flow test in the session (it costs 10-25 s to start)."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session", autouse=True)
def scenario_specs() -> None:
    """Discover the scenarios once, as every flow does first: it registers their TaskSpecs."""
    from extractors.discovery import discover_extractors

    discover_extractors()
