"""Running the samples from tests: as scripts in a clean environment, or imported offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without provider and agentkit settings (offline), plus ``extra``."""
    providers = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "AGENTKIT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(providers)}
    env.update(extra or {})
    return env


def run_sample(
    name: str, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``samples/<name>`` as a script from the repository root."""
    return subprocess.run(
        [sys.executable, str(SAMPLES / name), *args],
        input=stdin, capture_output=True, text=True, env=clean_env(env), timeout=120, cwd=ROOT,
    )
