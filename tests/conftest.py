"""Shared fixtures."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from tests.samples_support import SAMPLES

# Property tests must not depend on how busy the machine is: no per-example deadline and no
# "generation is slow" health check (CI shares two cores with other work). A test's own
# @settings overrides what it names and keeps the rest of this profile.
settings.register_profile(
    "agentkit", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("agentkit")

# Checkpoints are signed by default with a key file in the user's configuration directory.
# Point every way of finding that directory into a private temporary one, for this process
# and the subprocesses tests start, so tests never write into the real home directory.
_CONFIG_HOME = tempfile.mkdtemp(prefix="agentkit-tests-config-")
os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME
os.environ["APPDATA"] = _CONFIG_HOME
os.environ["AGENTKIT_CHECKPOINT_KEY_FILE"] = os.path.join(_CONFIG_HOME, "agentkit", "test.key")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_CONFIG_HOME, ignore_errors=True)


@pytest.fixture
def sample(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Import a sample module offline (no API key in the environment)."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AGENTKIT_")):
            monkeypatch.delenv(name)
    monkeypatch.syspath_prepend(str(SAMPLES))
    yield importlib.import_module
