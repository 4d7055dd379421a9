"""Durable runs written by earlier versions resume with today's code (tests/fixtures/durable).

Each stored scenario is what a crashed durable run left in its store (a base checkpoint and
signed step records) and, where the crash cut a payment short, the checkpoint of the
``UnfinishedToolCall`` stop its resume made. See ``tests/durable_corpus.py``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentkit import UnfinishedToolCall
from agentkit._checkpoints import Checkpoint, StepRecord, load_checkpoint
from agentkit.checkpoint import PickleSerializer
from tests.durable_corpus import KEY, RUN, SCENARIOS, load, resume

CORPUS = Path(__file__).resolve().parent / "fixtures" / "durable"


def stored() -> list[Any]:
    cases = []
    for manifest in sorted(CORPUS.glob("*/manifest.json")):
        for name, expected in json.loads(manifest.read_text()).items():
            cases.append(pytest.param(manifest.parent, name, expected,
                                      id=f"{manifest.parent.name}/{name}"))
    return cases


def test_the_newest_corpus_covers_every_scenario() -> None:
    newest = max(CORPUS.glob("*/manifest.json"), key=lambda path: path.parent.name)
    assert set(json.loads(newest.read_text())) == {scenario.name for scenario in SCENARIOS}


@pytest.mark.parametrize(("folder", "name", "expected"), stored())
def test_a_stored_crashed_run_resumes_to_its_recorded_result(
    folder: Path, name: str, expected: dict[str, Any], tmp_path: Path
) -> None:
    saved = json.loads((folder / f"{name}.json").read_text())
    store = load(saved)
    assert saved["steps"], "a crashed durable run left step records"
    serializer = PickleSerializer(KEY)
    for record in saved["steps"]:  # each record reads back as one
        assert isinstance(serializer.loads(base64.b64decode(record), checkpoint_id=RUN,
                                           namespace=store.namespace), StepRecord)
    assert load_checkpoint(store, serializer, RUN).reason == "running"
    outcome = resume(expected["kind"], store, tmp_path)
    assert outcome["asked"] == expected["asked"]
    assert outcome["ran"] == expected["ran"]
    if expected["kind"] != "parallel":  # a Parallel's answer is its last branch's: any order
        assert outcome["answer"] == expected["answer"]


@pytest.mark.parametrize(("folder", "name", "expected"),
                         [case for case in stored() if case.values[2]["asked_state"]])
def test_a_stored_unfinished_tool_call_stop_loads_and_resumes(
    folder: Path, name: str, expected: dict[str, Any], tmp_path: Path
) -> None:
    store = load(json.loads((folder / f"{name}.asked.json").read_text()))
    checkpoint = load_checkpoint(store, PickleSerializer(KEY), RUN)
    assert isinstance(checkpoint, Checkpoint)
    infos = [point.info for point in checkpoint.points if point.info is not None]
    assert [[info.tool_name, info.call_id] for info in infos
            if isinstance(info, UnfinishedToolCall)] == expected["asked"][:1]
    outcome = resume(expected["kind"], store, tmp_path)
    assert outcome["asked"] == expected["asked"][:1]  # the stored stop asks the same again
    if expected["kind"] != "parallel":
        assert outcome["answer"] == expected["answer"]
