"""A budget that runs out pauses the run; a human approves more, and a new process goes on.

A research agent searches topic after topic. The run has a cost budget (``RunLimits(cost=...)``)
and a checkpoint id: when its model calls have cost the budget, the run pauses before its next
call (an interrupt whose info is a ``LimitReached``) and is saved in a file store. The approval
is taken on stdin (or from ``--approve yes|no``); a *new process* resumes the run from the file
store with a larger budget, and the run finishes without repeating a search.

    python samples/budget.py
    python samples/budget.py --approve yes --budget 0.001 --raise-to 0.003

Offline by default (a scripted model that reports token usage, priced like gpt-4o-mini); live
with ``OPENAI_API_KEY`` (see samples/quickstart.py; give a budget your calls will reach).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attrs
from _common import live

from agentkit import (
    ChatModelAgent,
    LimitReached,
    Message,
    ModelPricing,
    ResponseMeta,
    Role,
    RunLimits,
    Runner,
    TokenUsage,
    get_session_value,
    tool,
    with_checkpoint_id,
    with_limits,
    with_session_values,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.models import ChatModel, ScriptedChatModel
from agentkit.testing import call, calls_message

DEFAULT_STORE = os.path.join(os.getcwd(), ".agentkit-checkpoints")
PRICING = ModelPricing(input_per_million=0.15, output_per_million=0.60)  # gpt-4o-mini, USD
TOPICS = ("battery chemistry", "charging networks", "grid storage", "recycling")


@tool
def search(topic: str) -> str:
    """Search the web for a topic and return a short summary.

    Args:
        topic: what to search for.
    """
    # Each search is logged with its process id: no search runs twice, across processes.
    with open(get_session_value("search_log"), "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {topic}\n")
    return f"3 recent articles on {topic}: costs fell, capacity grew, policy is catching up."


def scripted_researcher(messages: list[Message]) -> Message:
    """Plays the LLM offline: one search per reply, then a summary. It reports token usage
    (400 prompt tokens per message, 50 completion tokens) as a real server would."""
    done = [m for m in messages if m.role is Role.TOOL]
    if len(done) < len(TOPICS):
        topic = TOPICS[len(done)]
        reply = calls_message(call("search", {"topic": topic}, id=f"search-{len(done) + 1}"))
    else:
        reply = Message(Role.ASSISTANT, f"Summary of {len(done)} searches: the EV market grows.")
    usage = TokenUsage(400 * len(messages), 50, 400 * len(messages) + 50)
    return attrs.evolve(reply, response_meta=ResponseMeta("stop", usage))


def make_model() -> ChatModel:
    if live():
        from agentkit.models import OpenAIChatModel

        return OpenAIChatModel(os.environ.get("AGENTKIT_MODEL", "gpt-4o-mini"), pricing=PRICING)
    return ScriptedChatModel(scripted_researcher, pricing=PRICING)


def build_runner(store_dir: str, budget: float) -> Runner:
    agent = ChatModelAgent(
        "researcher",
        "researches a market",
        make_model(),
        instruction=(
            "Research the electric vehicle market: search each of these topics, one search per "
            f"turn: {', '.join(TOPICS)}. Then summarize in two sentences."
        ),
        tools=[search],
    )
    store = FileCheckPointStore(store_dir)
    return Runner(agent, checkpoint_store=store, limits=RunLimits(cost=budget))


def start(store_dir: str, budget: float, raise_to: float, approve: str | None) -> int:
    checkpoint_id = f"budget-{uuid.uuid4().hex[:8]}"
    runner = build_runner(store_dir, budget)
    print(f"[process {os.getpid()}] researching with a budget of ${budget:g}")
    log = os.path.join(store_dir, f"{checkpoint_id}.searches")
    result = runner.invoke(
        "Research the EV market.",
        with_checkpoint_id(checkpoint_id),
        with_session_values({"search_log": log}),  # saved with the run, read by the tool
    )
    tokens = result.usage.total_tokens
    print(f"[process {os.getpid()}] spent ${result.cost or 0:.5f} on {tokens} tokens")
    if not result.interrupted:
        print(result.text)
        return 0
    (paused,) = [c.info for c in result.interrupt.contexts if isinstance(c.info, LimitReached)]  # type: ignore[union-attr]
    print(f"[process {os.getpid()}] paused: {paused}")
    answer = approve
    if answer is None:
        answer = input(f"Raise the budget to ${raise_to:g}? (yes/no) ").strip().lower()
    if answer not in ("y", "yes"):
        print(f"[process {os.getpid()}] not approved; checkpoint {checkpoint_id!r} stays saved")
        return 0
    print(f"[process {os.getpid()}] approved; resuming in a new process")
    return subprocess.call(
        [
            sys.executable, os.path.abspath(__file__), "--store", store_dir,
            "--resume", checkpoint_id, "--budget", str(budget), "--raise-to", str(raise_to),
        ]
    )


def resume(store_dir: str, checkpoint_id: str, budget: float, raise_to: float) -> int:
    runner = build_runner(store_dir, budget)
    print(f"[process {os.getpid()}] resuming {checkpoint_id} with a budget of ${raise_to:g}")
    result = runner.resume(checkpoint_id, with_limits(RunLimits(cost=raise_to))).result()
    print(f"[process {os.getpid()}] spent ${result.cost or 0:.5f} more")
    if result.interrupted:
        print(f"[process {os.getpid()}] paused again: the budget ran out once more")
        return 0
    print(result.text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approve", choices=["yes", "no", "y", "n"], help="answer without asking")
    parser.add_argument("--store", default=DEFAULT_STORE, help="checkpoint directory")
    parser.add_argument("--budget", type=float, default=0.001, help="the first budget, in USD")
    parser.add_argument("--raise-to", type=float, default=0.003, help="the approved budget")
    parser.add_argument("--resume", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.makedirs(args.store, exist_ok=True)
    if args.resume:
        return resume(args.store, args.resume, args.budget, args.raise_to)
    return start(args.store, args.budget, args.raise_to, args.approve)


if __name__ == "__main__":
    raise SystemExit(main())
