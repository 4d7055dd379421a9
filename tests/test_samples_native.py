"""samples/native_models.py: the same ReAct agent on each native model class, offline."""

from __future__ import annotations

import re

from tests.samples_support import run_sample


def test_the_native_models_sample_runs_offline_on_the_fake_servers() -> None:
    done = run_sample("native_models.py")  # without the providers' keys: offline
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name, server in (
        ("AnthropicChatModel", "FakeAnthropicServer"),
        ("GeminiChatModel", "FakeGeminiServer"),
        ("OpenAIResponsesModel", "FakeResponsesServer"),
    ):
        assert f"{name} (offline, {server}): It is sunny and 21°C in Paris." in lines
    cache = re.search(r"tokens: (\d+) in \((\d+) read from the cache", lines[1])
    assert cache is not None and int(cache.group(2)) > 0  # the second call read the first's prefix
