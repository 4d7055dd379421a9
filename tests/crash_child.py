"""The child process of the crash matrix: runs one agent and is killed with SIGKILL somewhere.

``python -m tests.crash_child '<json plan>'``. The plan names the agent kind, the checkpoint
store, the checkpoint id, the effects file, the loopback model server and where to die:

* ``{"at": "start" | "end", "number": n}``: the n-th tool call kills its own process with
  SIGKILL, before its effect (``start``) or after it, before returning (``end``);
* ``{"at": "save" | "saved", "number": n}``: the n-th step record: just before it is written,
  or just after;
* ``{"at": "torn", "number": n}`` (file store): half of the n-th step record reaches the file,
  then the process dies (a record torn by the kill);
* ``{"at": "none"}``: the parent kills it (during a model call, or at a random moment).

It prints ``ready`` when the run starts, and if it ever completes, ``done`` with what it did
as JSON (``{"calls": tool calls started, "steps": step records written}``: a run left to
complete tells the parent where it can be killed).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import zlib
from pathlib import Path
from typing import Any

from agentkit import Runner, with_checkpoint_id
from agentkit.checkpoint import FileCheckPointStore, RedisCheckPointStore, SQLiteCheckPointStore
from agentkit.models import OpenAIChatModel
from tests.durable_support import Effects, Tools, build


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def store_for(spec: dict[str, Any], kill: dict[str, Any], counter: dict[str, int]) -> Any:
    """The store named by ``spec``, dying at the step record ``kill`` names (``counter["steps"]``
    counts the records)."""
    kinds = {"file": FileCheckPointStore, "sqlite": SQLiteCheckPointStore,
             "redis": RedisCheckPointStore}
    base: Any = kinds[spec["kind"]]
    at, number = kill.get("at"), kill.get("number", 0)
    class Dying(base):  # type: ignore[misc]
        def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
            counter["steps"] += 1
            here = counter["steps"] == number
            if here and at == "save":
                die()
            if here and at == "torn":
                frame = len(data).to_bytes(4, "big") + zlib.crc32(data).to_bytes(4, "big") + data
                path = self.steps_path_for(checkpoint_id)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(fd, frame[: len(frame) // 2])
                die()
            super().append_step(checkpoint_id, data, sync=sync)
            if here and at == "saved":
                die()

    if spec["kind"] == "redis":
        return Dying(spec["where"], prefix=spec["prefix"])
    return Dying(spec["where"])


def main() -> None:
    plan = json.loads(sys.argv[1])
    kill = plan["kill"]
    counter = {"calls": 0, "steps": 0}

    def hook(moment: str, tool_name: str, call_id: str) -> None:
        if moment == "start":
            counter["calls"] += 1
        if moment == kill.get("at") and counter["calls"] == kill.get("number"):
            die()

    tools = Tools(Effects(Path(plan["effects"])), hook)

    def model(name: str) -> Any:
        return OpenAIChatModel(name, base_url=plan["base_url"], api_key="sk-test", max_retries=0)

    agent = build(plan["kind"], model, tools)
    runner = Runner(agent, checkpoint_store=store_for(plan["store"], kill, counter),
                    lease_ttl=plan["lease_ttl"])
    print("ready", flush=True)
    result = runner.invoke("go", with_checkpoint_id(plan["checkpoint_id"]))
    assert result.interrupt is None and result.text, result
    print("done", json.dumps(counter), flush=True)


if __name__ == "__main__":
    main()
