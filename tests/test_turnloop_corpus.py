"""Every TurnLoop checkpoint in ``tests/fixtures/turnloop/<version>/`` is resumed by a new loop
to the result recorded when it was written: a stored loop survives every later version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.testing import no_thread_leak
from tests.turnloop_corpus import CHECKPOINT_ID, SCENARIOS, resume

CORPUS = Path(__file__).resolve().parent / "fixtures" / "turnloop"


def entries() -> list[Any]:
    found = []
    for manifest in sorted(CORPUS.glob("*/manifest.json")):
        for name, entry in json.loads(manifest.read_text()).items():
            found.append(pytest.param(manifest.parent, name, entry, id=f"{manifest.parent.name}-{name}"))
    return found


def test_the_newest_corpus_covers_every_scenario() -> None:
    newest = max(CORPUS.glob("*/manifest.json"), key=lambda path: path.parent.name)
    assert set(json.loads(newest.read_text())) == {scenario.name for scenario in SCENARIOS}


@pytest.mark.parametrize(("folder", "name", "entry"), entries())
def test_a_stored_loop_resumes_to_its_recorded_result(folder: Path, name: str, entry: dict[str, Any]) -> None:
    store = InMemoryCheckPointStore()
    store.set(CHECKPOINT_ID, (folder / f"{name}.ckpt").read_bytes())
    with no_thread_leak():
        done = resume(store)
    assert json.loads(json.dumps(done)) == entry
