"""Cost of saving and loading a checkpoint of a 50-message run with the default serializer.

The checkpoint has the shape the Runner saves: the run's input and its history of 50 recorded
events (user questions, assistant tool calls with usage, tool results), session values and an
interrupt point. It is signed (the default), bound to a namespace, and loaded through the
opcode check and the restricted unpickler. Printed: best-of-repeats CPU milliseconds for
dumps, loads and both, how ``loads`` divides into the opcode check and building the objects,
and plain ``pickle`` (unsigned, unrestricted) for scale.
Run: ``python benchmarks/bench_checkpoint.py``.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
import timeit
from collections.abc import Callable

from agentkit import AgentInput, MessageVariant, RunStep
from agentkit._checkpoints import Checkpoint
from agentkit._points import ResumePoint
from agentkit._runctx import RecordedEvent
from agentkit.checkpoint import PickleSerializer
from agentkit.checkpoint._scan import check_stream
from agentkit.checkpoint.serializer import MAX_DEPTH, MAX_OBJECTS
from agentkit.schema import FunctionCall, Message, ResponseMeta, TokenUsage, ToolCall


def messages(count: int) -> list[Message]:
    """A conversation of ``count`` messages: question, tool call, tool result, ..."""
    result: list[Message] = []
    for i in range(count):
        if i % 3 == 0:
            result.append(Message(role="user", content=f"question {i} " * 10))
        elif i % 3 == 1:
            call = ToolCall(id=f"c{i}", function=FunctionCall("get_weather", '{"city": "Paris"}'))
            meta = ResponseMeta(finish_reason="tool_calls", usage=TokenUsage(10, 5, 15))
            result.append(Message(role="assistant", tool_calls=[call], response_meta=meta))
        else:
            result.append(
                Message(role="tool", content="sunny " * 20, tool_call_id=f"c{i - 1}",
                        tool_name="get_weather")
            )  # fmt: skip
    return result


def checkpoint(count: int) -> Checkpoint:
    """What the Runner saves for a run of ``count`` messages interrupted at its end."""
    conversation = messages(count)
    history = [
        RecordedEvent(
            seq=i,
            agent_name="assistant",
            run_path=(RunStep("assistant"),),
            variant=MessageVariant(
                is_streaming=False,
                message=message,
                message_stream=None,
                role=message.role,
                tool_name=message.tool_name,
            ),
            is_transfer=False,
        )
        for i, message in enumerate(conversation)
    ]
    return Checkpoint(
        root_input=AgentInput(messages=conversation[:1]),
        session_values={"user": "ada", "cart": [1, 2, 3]},
        history=history,
        enable_streaming=False,
        points=[
            ResumePoint(
                id="approve",
                address=("assistant",),
                state={"amount": 120},
                is_root_cause=True,
            )
        ],
        interrupt_data={"question": "approve?"},
    )


def best_ms(function: Callable[[], object], number: int = 50, repeat: int = 20) -> float:
    """Best CPU time per call of this thread, in ms (steady when other processes load the
    machine; wall time is the same on an idle one)."""
    runs = timeit.repeat(function, number=number, repeat=repeat, timer=time.thread_time)
    return min(runs) / number * 1e3


def main() -> None:
    os.environ.setdefault("AGENTKIT_CHECKPOINT_KEY_FILE", os.path.join(tempfile.mkdtemp(), "k"))
    value = checkpoint(50)
    serializer = PickleSerializer()
    namespace = "file:/var/lib/app/checkpoints"
    data = serializer.dumps(value, checkpoint_id="run-1", namespace=namespace)
    dumps = best_ms(lambda: serializer.dumps(value, checkpoint_id="run-1", namespace=namespace))
    loads = best_ms(lambda: serializer.loads(data, checkpoint_id="run-1", namespace=namespace))
    payload = data[49:]  # after magic, version, flags, key id and HMAC (signed envelope)
    check = best_ms(
        lambda: check_stream(payload, max_depth=MAX_DEPTH, max_objects=MAX_OBJECTS)
    )
    plain = pickle.dumps(value, protocol=5)
    plain_dumps = best_ms(lambda: pickle.dumps(value, protocol=5))
    plain_loads = best_ms(lambda: pickle.loads(plain))
    print(f"checkpoint of a 50-message run: {len(data)} bytes")
    print(f"  PickleSerializer  dumps {dumps:.3f} ms  loads {loads:.3f} ms  "
          f"save+load {dumps + loads:.3f} ms")  # fmt: skip
    print(f"  of loads: opcode check {check:.3f} ms, envelope and building the rest "
          f"{loads - check:.3f} ms")  # fmt: skip
    print(f"  plain pickle      dumps {plain_dumps:.3f} ms  loads {plain_loads:.3f} ms  "
          f"save+load {plain_dumps + plain_loads:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
