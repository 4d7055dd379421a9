"""Evaluate an agent: an eval suite replayed offline from recorded model calls, or run live.

A travel assistant (two tools: the weather and currency conversion) is scored over the cases
of ``samples/eval_suite.yaml``: which tool it called with which arguments, what the answer
says, how many steps it took, and an LLM judge's verdict. The report prints as a table; the
exit status fails CI below a pass rate.

    python samples/eval_suite.py                      # offline: replays the cassettes
    OPENAI_API_KEY=... python samples/eval_suite.py   # live: the same suite, a real model
    OPENAI_API_KEY=... python samples/eval_suite.py --record   # live, and record the cassettes
    python samples/eval_suite.py --json report.json --baseline main.json --min-rate 0.8

Offline, both models (the agent's and the judge's) answer from the cassettes in
``samples/cassettes/eval_suite/`` (recorded with ``--record``; change a prompt, a tool or a
case and the replay fails with a diff of the request that changed: record again). The
committed cassettes were recorded against agentkit's loopback OpenAI-compatible test server
(``FakeOpenAIServer``) standing in for a model, as no paid API was at hand:
``OPENAI_API_KEY=sk-test OPENAI_BASE_URL=<its URL> python samples/eval_suite.py --record``
(``tests/test_samples_evals.py`` does exactly that and checks the result is what is
committed). Record them against your own model to evaluate it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, live

from agentkit import ChatModelAgent, Runner, tool
from agentkit.evals import Dataset, EvalReport, Judge, evaluate
from agentkit.models import ChatModel
from agentkit.testing import cassette

HERE = Path(__file__).resolve().parent
DATASET = HERE / "eval_suite.yaml"
CASSETTES = HERE / "cassettes" / "eval_suite"

WEATHER = {"Paris": ("sunny", 21), "London": ("light rain", 14), "Tokyo": ("cloudy", 18)}
RATES = {("USD", "EUR"): 0.92, ("EUR", "USD"): 1.09, ("EUR", "JPY"): 162.5, ("USD", "JPY"): 149.0}


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: the city's name in English, such as "Paris".
    """
    if city not in WEATHER:
        return f"no weather data for {city}"
    sky, celsius = WEATHER[city]
    return f"{sky}, {celsius}°C"


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money between currencies.

    Args:
        amount: how much money.
        source: the currency it is in, an ISO code such as "USD".
        target: the currency wanted, an ISO code such as "EUR".
    """
    rate = RATES.get((source.upper(), target.upper()))
    if rate is None:
        return f"no exchange rate from {source} to {target}"
    return f"{amount:,.2f} {source.upper()} = {amount * rate:,.2f} {target.upper()}"


INSTRUCTION = (
    "You are a travel assistant. Use get_weather for the weather and convert_currency for "
    "money; never guess either. If a tool has no data, say so. Answer in one or two sentences."
)
RUBRIC = (
    "The answer responds to the user's question, uses the facts from the tools when tools "
    "were needed, and does not invent weather or exchange rates."
)


def make_agent(model: ChatModel) -> ChatModelAgent:
    """The travel assistant under evaluation."""
    return ChatModelAgent(
        "travel_assistant",
        "answers travel questions about weather and money",
        model,
        instruction=INSTRUCTION,
        tools=[get_weather, convert_currency],
    )


def models(mode: str, folder: Path) -> tuple[ChatModel, ChatModel]:
    """The agent's and the judge's models: from the cassettes, live, or live and recorded."""
    if mode == "replay":
        return cassette(None, folder / "agent.yaml"), cassette(None, folder / "judge.yaml")
    from agentkit.models import OpenAIChatModel

    name = os.environ.get("AGENTKIT_MODEL", "gpt-4o-mini")
    agent_model, judge_model = OpenAIChatModel(name), OpenAIChatModel(name)
    if mode == "record":
        return (
            cassette(agent_model, folder / "agent.yaml", mode="record"),
            cassette(judge_model, folder / "judge.yaml", mode="record"),
        )
    return agent_model, judge_model


def run_suite(mode: str, folder: Path = CASSETTES, concurrency: int = 4) -> EvalReport:
    """Evaluate the agent over the suite; ``mode`` is ``replay``, ``live`` or ``record``."""
    agent_model, judge_model = models(mode, folder)
    dataset = Dataset.from_file(DATASET, checks=[Judge(judge_model, RUBRIC)])
    # Recording runs one case at a time, so each cassette reads in the dataset's order.
    return evaluate(
        Runner(make_agent(agent_model)),
        dataset,
        concurrency=1 if mode == "record" else concurrency,
        retries=1 if mode == "live" else 0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--record", action="store_true", help="record the cassettes (live)")
    parser.add_argument("--cassettes", type=Path, default=CASSETTES, help="cassette folder")
    parser.add_argument("--concurrency", type=int, default=4, help="cases run at once")
    parser.add_argument("--json", type=Path, help="write the report's JSON here")
    parser.add_argument("--baseline", type=Path, help="compare with this earlier JSON report")
    parser.add_argument("--min-rate", type=float, default=1.0, help="fail below this pass rate")
    args = parser.parse_args(argv)
    if args.record and not live():
        parser.error("--record calls the real model: set OPENAI_API_KEY (and OPENAI_BASE_URL)")
    mode = "record" if args.record else "live" if live() else "replay"
    banner(f"eval suite ({mode})")
    report = run_suite(mode, args.cassettes, args.concurrency)
    print(report)
    if args.json:
        args.json.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    if args.baseline:
        print(report.compare(json.loads(args.baseline.read_text(encoding="utf-8"))))
    return 0 if report.pass_rate >= args.min_rate else 1


if __name__ == "__main__":
    raise SystemExit(main())
