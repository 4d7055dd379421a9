"""The crash matrix: real processes killed with SIGKILL, resumed by another process.

For each agent kind (``tests.durable_support.KINDS``) and each store (file, SQLite, Redis), a
child process (``tests/crash_child.py``) runs the agent against a loopback OpenAI-compatible
server and is killed with SIGKILL at a random point: during a model call (the server kills it
when the request arrives), during a tool call (before or after its effect), just before or
after a step record is written, in the middle of writing one (file store: a torn record), or
at a random moment. This process then resumes the run once the dead run's lease expired, and
checks:

* the run completes (unfinished calls of ``pay`` are answered, yes or no);
* every tool call whose result was in the store when the child died never runs again;
* every call of ``pay`` (not idempotent) that had started but not finished comes back as an
  :class:`~agentkit.UnfinishedToolCall`; every such call of ``work`` (idempotent) runs again;
* the store is sound and clean afterwards: the checkpoint is a tombstone, no step records,
  no temporary or lease files left, the lease free.

``test_crash_matrix_stress`` (``-m stress``) makes more than 200 kills and prints the counts;
``test_a_few_kills`` is the small version in the default run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from agentkit import (
    Approve,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointNotFoundError,
    Message,
    Reject,
    Role,
    Runner,
    UnfinishedToolCall,
    with_checkpoint_id,
)
from agentkit._checkpoints import load_checkpoint
from agentkit.checkpoint import (
    FileCheckPointStore,
    PickleSerializer,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
    lease_for,
)
from agentkit.models import OpenAIChatModel
from agentkit.testing import FakeOpenAIServer, Reply
from tests.durable_support import KINDS, Effects, Tools, build, reply_for_request
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent
GUARD = 120.0  # failure guard for a child process, never a pace
LEASE_TTL = 0.5
STORES = ("file", "sqlite", "redis")
KILLS = ("model", "start", "end", "save", "saved", "torn", "random")


# --- one trial ------------------------------------------------------------------------------


class Server:
    """The loopback model server: answers every agent from its conversation, and kills the
    child when the request it was told to die at arrives."""

    def __init__(self) -> None:
        self.kind = "react"
        self.child: subprocess.Popen[str] | None = None
        self.kill_at = 0
        self.seen = 0
        self.asked = threading.Event()  # the child made its first model request
        self.lock = threading.Lock()
        self.server = FakeOpenAIServer(handler=self.answer)

    def answer(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.seen += 1
            if self.child is not None:
                self.asked.set()
            if self.child is not None and self.seen == self.kill_at:
                os.kill(self.child.pid, signal.SIGKILL)
        return reply_for_request(self.kind, request)


@attrs.define
class Outcome:
    """What one trial saw."""

    killed: bool  # the child died before its run completed
    where: str
    resumes: int = 0
    unfinished_asked: int = 0
    reran: int = 0  # unfinished idempotent calls that ran again
    finished_kept: int = 0  # finished calls that did not run again (all of them)
    fresh: bool = False  # killed before the run had saved anything: started again
    completed: bool = False  # killed after the run completed, while its process exited
    profile: Profile | None = None  # a run left to complete: what it did


@attrs.frozen
class Profile:
    """What a run of an agent kind does when nothing kills it: where it can be killed."""

    models: int  # model requests
    calls: int  # tool calls started
    steps: int  # step records written
    seconds: float  # from its start to its end


def make_store(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "file":
        return FileCheckPointStore(spec["where"])
    if spec["kind"] == "sqlite":
        return SQLiteCheckPointStore(spec["where"])
    return RedisCheckPointStore(spec["where"], prefix=spec["prefix"])


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def finished_calls(store: Any, checkpoint_id: str) -> set[str] | None:
    """The ids of the calls whose results the store holds; ``None``: nothing saved."""
    try:
        checkpoint = load_checkpoint(store, PickleSerializer(), checkpoint_id)
    except CheckpointNotFoundError:
        return None
    found: set[str] = set()

    def visit(value: Any, depth: int = 0) -> None:
        if depth > 60:
            return
        if isinstance(value, Message):
            if value.role is Role.TOOL and value.tool_call_id:
                found.add(value.tool_call_id)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                visit(item, depth + 1)
        elif attrs.has(type(value)):
            for field in attrs.fields(type(value)):
                visit(getattr(value, field.name, None), depth + 1)

    visit([record.message() for record in checkpoint.history])
    visit([point.state for point in checkpoint.points])
    if "outer-0-0" in found:  # the agent tool's call finished: every call inside it did
        found.add("inner-*")
    return found


def models(base_url: str) -> Any:
    """The model factory of the agents: each agent's model is named after it, on the server."""

    def model(name: str) -> Any:
        return OpenAIChatModel(name, base_url=base_url, api_key="sk-test", max_retries=0)

    return model


def once_free(call: Any) -> Any:
    """``call()`` once the dead run's lease on the id expired (it raises busy until then)."""
    deadline = time.monotonic() + GUARD
    while True:
        try:
            return call()
        except CheckpointBusyError:
            if time.monotonic() > deadline:
                raise
            threading.Event().wait(0.1)


def resume_until_done(
    kind: str, store: Any, checkpoint_id: str, effects: Effects, base_url: str, outcome: Outcome
) -> list[UnfinishedToolCall]:
    """Resume (once the dead run's lease expired) until the run completes."""

    model = models(base_url)
    asked: list[UnfinishedToolCall] = []
    targets: dict[str, Any] | None = None
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        runner = Runner(build(kind, model, Tools(effects)), checkpoint_store=store,
                        lease_ttl=LEASE_TTL)
        try:
            result = runner.resume(checkpoint_id, targets=targets).result()
        except CheckpointBusyError:
            threading.Event().wait(0.1)  # the dead run's lease has not expired yet
            continue
        outcome.resumes += 1
        if result.interrupt is None:
            return asked
        targets = {}
        for context in result.interrupt.contexts:
            assert isinstance(context.info, UnfinishedToolCall), context.info
            asked.append(context.info)
            targets[context.id] = [True, Reject("no"), Approve(), False][len(asked) % 4]
    raise AssertionError(f"{kind}: the run did not complete within {GUARD:g} s")


def trial(
    kind: str, store_spec: dict[str, Any], kill: dict[str, Any], server: Server, tmp: Path,
    rng: random.Random,
) -> Outcome:
    """Run ``kind`` in a child, kill it as ``kill`` says, resume it here, check everything."""
    checkpoint_id = f"{kind}-{uuid.uuid4().hex[:8]}"
    effects = Effects(tmp / f"effects-{checkpoint_id}")
    plan = {
        "kind": kind, "store": store_spec, "checkpoint_id": checkpoint_id,
        "effects": str(effects.path), "base_url": server.server.base_url,
        "kill": kill if kill["at"] not in ("model", "random") else {"at": "none"},
        "lease_ttl": LEASE_TTL,
    }
    where = f"{kind} in {store_spec['kind']}, killed at {kill}"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_child", json.dumps(plan)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
    )
    try:
        with server.lock:
            server.kind, server.child, server.seen = kind, child, 0
            server.asked.clear()
            server.kill_at = kill["number"] if kill["at"] == "model" else 0
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline().strip()
        started = time.monotonic()
        if first != "ready":
            child.wait(GUARD)
            raise AssertionError(f"{where}: the child did not start: {child.stderr.read()[-3000:]}")
        if kill["at"] == "random":  # a moment of the run, from its first model request
            server.asked.wait(GUARD)
            threading.Event().wait(rng.uniform(0.0, kill["within"]))
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
        out, err = child.communicate(timeout=GUARD)
        seconds = time.monotonic() - started
    finally:
        with server.lock:
            server.child = None
            models_seen = server.seen
        if child.poll() is None:
            child.kill()
            child.wait()
    store = make_store(store_spec)
    try:
        if child.returncode == 0:  # it completed before the kill came
            assert out.startswith("done"), where
            with pytest.raises(CheckpointConsumedError):
                Runner(build(kind, models(server.server.base_url), Tools(effects)),
                       checkpoint_store=store).resume(checkpoint_id)
            check_clean(store, store_spec, checkpoint_id, where)
            starts = Counter((e.tool, e.call_id) for e in effects.read() if e.what == "start")
            assert all(count == 1 for count in starts.values()), f"{where}: {starts}"
            did = json.loads(out.split(None, 1)[1])
            profile = Profile(models_seen, did["calls"], did["steps"], seconds)
            return Outcome(False, where, profile=profile)
        assert child.returncode == -signal.SIGKILL, f"{where}: {err[-3000:]}"
        return recover(kind, store, store_spec, checkpoint_id, effects, server, where)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def recover(
    kind: str, store: Any, store_spec: dict[str, Any], checkpoint_id: str, effects: Effects,
    server: Server, where: str,
) -> Outcome:
    outcome = Outcome(True, where)
    before = effects.read()
    try:
        durable = finished_calls(store, checkpoint_id)
    except CheckpointConsumedError:
        # Killed after the run completed (its tombstone was written): a resume says so, and
        # clears step records the kill may have left under the tombstone.
        runner = Runner(build(kind, models(server.server.base_url), Tools(effects)),
                        checkpoint_store=store, lease_ttl=LEASE_TTL)
        with pytest.raises(CheckpointConsumedError):
            once_free(lambda: runner.resume(checkpoint_id))
        once = Counter((e.tool, e.call_id) for e in before if e.what == "start")
        assert all(count == 1 for count in once.values()), f"{where}: {once}"
        check_clean(store, store_spec, checkpoint_id, where)
        outcome.completed = True
        return outcome
    if durable is None:
        # Killed before the run wrote its input: nothing to resume; the caller starts it
        # again. Nothing of it may have run: every tool runs after the first write.
        assert before == [], f"{where}: tools ran before the run was saved"
        outcome.fresh = True
        return outcome
    asked = resume_until_done(kind, store, checkpoint_id, effects, server.server.base_url,
                              outcome)
    outcome.unfinished_asked = len(asked)
    starts = Counter((e.tool, e.call_id, e.key) for e in effects.read() if e.what == "start")
    for tool_name, call_id, key in {(e.tool, e.call_id, e.key) for e in before
                                    if e.what == "start"}:
        done = call_id in durable or (call_id.startswith("inner-") and "inner-*" in durable)
        if done:
            assert starts[(tool_name, call_id, key)] == 1, f"{where}: {call_id} ran again"
            outcome.finished_kept += 1
        elif tool_name == "pay":
            assert [(u.call_id, u.key) for u in asked if u.call_id == call_id] == [
                (call_id, key)
            ], f"{where}: the unfinished payment {call_id} was not asked about"
        else:
            assert starts[(tool_name, call_id, key)] >= 2, (
                f"{where}: the unfinished call {call_id} did not run again"
            )
            outcome.reran += 1
    for unfinished in asked:
        assert unfinished.tool_name == "pay", where
    check_clean(store, store_spec, checkpoint_id, where)
    return outcome


def check_clean(store: Any, spec: dict[str, Any], checkpoint_id: str, where: str) -> None:
    """The completed run left its tombstone only: no records, no stray files, a free lease."""
    assert store.read_steps(checkpoint_id) == [], where
    with pytest.raises(CheckpointConsumedError):
        load_checkpoint(store, PickleSerializer(), checkpoint_id)
    with lease_for(store, checkpoint_id, 1.0):
        pass
    if spec["kind"] == "file":
        directory = Path(spec["where"])
        assert not list((directory / ".tmp").iterdir()), f"{where}: temporary files left"
        assert not list(directory.glob("*.steps")), f"{where}: step records left"
        assert not list(directory.glob("*.lease")), f"{where}: a lease file left"


# --- the matrix -----------------------------------------------------------------------------


WORKERS = 3
"""Trials run this many at a time, each worker with its own server (they mostly wait)."""


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Server]]:
    fakes = [Server() for _ in range(WORKERS)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake.server)
        yield fakes


def store_spec(kind: str, tmp: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        return {"kind": "file", "where": str(tmp / "checkpoints")}
    if kind == "sqlite":
        return {"kind": "sqlite", "where": str(tmp / "checkpoints.db")}
    url = request.getfixturevalue("redis_url")
    return {"kind": "redis", "where": url, "prefix": f"crash:{uuid.uuid4().hex}:"}


def profile_of(kind: str, spec: dict[str, Any], server: Server, tmp: Path) -> Profile:
    """Run ``kind`` here, left alone: it must complete cleanly; what it did says where a
    child running it can be killed."""
    from tests.crash_child import store_for

    checkpoint_id = f"{kind}-alone-{uuid.uuid4().hex[:8]}"
    effects = Effects(tmp / f"effects-{checkpoint_id}")
    counter = {"calls": 0, "steps": 0}

    def hook(moment: str, tool_name: str, call_id: str) -> None:
        if moment == "start":
            with server.lock:
                counter["calls"] += 1

    store = store_for(spec, {"at": "none"}, counter)
    try:
        runner = Runner(build(kind, models(server.server.base_url), Tools(effects, hook)),
                        checkpoint_store=store, lease_ttl=LEASE_TTL)
        with server.lock:
            server.kind, server.child, server.seen = kind, None, 0
        started = time.monotonic()
        result = runner.invoke("go", with_checkpoint_id(checkpoint_id))
        seconds = time.monotonic() - started
        assert result.interrupt is None and result.text, f"{kind} left alone: {result}"
        where = f"{kind} in {spec['kind']}, left alone"
        check_clean(store, spec, checkpoint_id, where)
        starts = Counter((e.tool, e.call_id) for e in effects.read() if e.what == "start")
        assert all(count == 1 for count in starts.values()), f"{where}: {starts}"
        with server.lock:
            return Profile(server.seen, counter["calls"], counter["steps"], seconds)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def random_kill(
    rng: random.Random, store: str, profile: Profile, at_random: bool
) -> dict[str, Any]:
    """A kill somewhere in a run that does what ``profile`` says (``at_random``: also at a
    random moment, which may come after the run completed)."""
    kinds = [kill for kill in KILLS
             if (kill != "torn" or store == "file") and (kill != "random" or at_random)]
    at = rng.choice(kinds)
    if at == "random":
        return {"at": at, "within": profile.seconds}
    numbers = {"model": profile.models, "start": profile.calls, "end": profile.calls,
               "save": profile.steps, "saved": profile.steps, "torn": profile.steps}
    return {"at": at, "number": rng.randint(1, max(1, numbers[at]))}


def run_cell(
    kind: str, store: str, spec: dict[str, Any], trials: int, rng: random.Random,
    server: Server, tmp: Path, at_random: bool,
) -> Counter[str]:
    """``trials`` kills of ``kind`` in ``store``, after a run left to complete."""
    counts: Counter[str] = Counter()
    # A run left to complete first: it must, cleanly, and it says where to kill.
    profile = profile_of(kind, spec, server, tmp)
    counts["runs left to complete"] += 1
    for _ in range(trials):
        kill = random_kill(rng, store, profile, at_random)
        outcome = trial(kind, spec, kill, server, tmp, rng)
        counts["trials"] += 1
        counts["kills"] += outcome.killed
        counts[f"killed at {kill['at']}"] += outcome.killed
        counts["killed before the first save (started again)"] += outcome.fresh
        counts["unfinished payments asked about"] += outcome.unfinished_asked
        counts["unfinished idempotent calls run again"] += outcome.reran
        counts["finished calls not run again"] += outcome.finished_kept
        counts["resumes"] += outcome.resumes
        counts["killed after the run completed"] += outcome.completed
    return counts


def run_matrix(
    cells: list[tuple[str, str]], trials: int, seed: int, servers: list[Server], tmp_path: Path,
    request: pytest.FixtureRequest, *, at_random: bool = True,
) -> Counter[str]:
    """Run every ``(agent kind, store)`` cell, a few at a time; add up what they saw."""
    free: queue.Queue[Server] = queue.Queue()
    for server in servers:
        free.put(server)

    def cell(index: int, kind: str, store: str, spec: dict[str, Any]) -> Counter[str]:
        server = free.get()
        try:
            rng = random.Random(f"{seed}-{index}")
            return run_cell(kind, store, spec, trials, rng, server, tmp_path, at_random)
        finally:
            free.put(server)

    specs = [store_spec(store, tmp_path / f"{kind}-{store}", request) for kind, store in cells]
    counts: Counter[str] = Counter()
    with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
        futures = [pool.submit(cell, index, kind, store, spec)
                   for index, ((kind, store), spec) in enumerate(zip(cells, specs, strict=True))]
        for future in futures:
            counts.update(future.result(timeout=3600))
    return counts


FEW = [("react", "file"), ("parallel", "sqlite"), ("agenttool", "file"),
       ("sequential", "sqlite"), ("planexecute", "file")]


def test_a_few_kills(
    servers: list[Server], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    counts = run_matrix(FEW, 1, 27, servers, tmp_path, request, at_random=False)
    assert counts["trials"] == len(FEW)
    assert counts["kills"] == len(FEW), counts


@pytest.mark.stress
@pytest.mark.timeout(3600)
def test_crash_matrix_stress(servers: list[Server], tmp_path: Path,
                             request: pytest.FixtureRequest,
                             capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("AGENTKIT_CRASH_SEED", "2027"))
    trials = int(os.environ.get("AGENTKIT_CRASH_TRIALS", "10"))  # per agent kind and store
    cells = [(kind, store) for kind in KINDS for store in STORES]
    counts = run_matrix(cells, trials, seed, servers, tmp_path, request)
    with capsys.disabled():
        print(f"\ncrash matrix (seed {seed}):")
        for name, value in sorted(counts.items()):
            print(f"  {name}: {value}")
    assert counts["trials"] == trials * len(cells)
    assert counts["kills"] >= min(200, trials * len(cells) * 9 // 10), counts
