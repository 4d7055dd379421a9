"""Shared fixtures."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from tests.samples_support import SAMPLES


@pytest.fixture
def sample(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Import a sample module offline (no API key in the environment)."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AGENTKIT_")):
            monkeypatch.delenv(name)
    monkeypatch.syspath_prepend(str(SAMPLES))
    yield importlib.import_module
