"""Every checkpoint in the corpus (``tests/fixtures/checkpoints/<version>/``) loads and resumes
to the result recorded when it was written: stored checkpoints survive every later version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkit import CheckpointConsumedError, Runner
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.testing import no_thread_leak
from tests.checkpoint_corpus import CORPUS_KEY, SCENARIOS, summaries

CORPUS = Path(__file__).resolve().parent / "fixtures" / "checkpoints"
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def entries() -> list[Any]:
    found = []
    for manifest in sorted(CORPUS.glob("*/manifest.json")):
        for name, entry in json.loads(manifest.read_text()).items():
            found.append(pytest.param(manifest.parent, name, entry, id=f"{manifest.parent.name}-{name}"))
    return found


def test_the_newest_corpus_covers_every_scenario() -> None:
    # Corpus folders are named so that they sort by date: <yyyy-mm-dd>-<what changed>.
    newest = max(CORPUS.glob("*/manifest.json"), key=lambda path: path.parent.name)
    assert set(json.loads(newest.read_text())) == set(BY_NAME)


@pytest.mark.parametrize(("folder", "name", "entry"), entries())
def test_a_stored_checkpoint_resumes_to_its_recorded_result(
    folder: Path, name: str, entry: dict[str, Any]
) -> None:
    scenario = BY_NAME[name]
    store = InMemoryCheckPointStore()
    store.set(entry["checkpoint_id"], (folder / f"{name}.ckpt").read_bytes())
    runner = Runner(
        scenario.build(False), checkpoint_store=store, serializer=PickleSerializer(CORPUS_KEY)
    )
    answers = {target: scenario.resume_data for target in entry["targets"]}
    if entry["consumed"]:
        with pytest.raises(CheckpointConsumedError):
            runner.resume(entry["checkpoint_id"], targets=answers)
        return
    with no_thread_leak():
        resumed = list(runner.resume(entry["checkpoint_id"], targets=answers))
    assert sorted(map(repr, summaries(resumed))) == sorted(map(repr, entry["resumed"]))
