"""A stand-in for a real model behind FakeOpenAIServer, for samples/eval_suite.py.

The sample's committed cassettes were recorded against it (no paid API here): it answers the
travel assistant the way a good tool-using model does, and grades answers as a judge. Run
``python -m tests.eval_sample_support`` to record the sample's cassettes again after a change
to the sample's prompts, tools or cases.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentkit.testing import FakeOpenAIServer, Reply, call
from tests.samples_support import ROOT, SAMPLES, clean_env

CASSETTES = SAMPLES / "cassettes" / "eval_suite"

_CITIES = ("Paris", "London", "Tokyo", "Atlantis")


def _user_calls(question: str) -> list[Any]:
    """The tool calls a good model makes for the question, in order."""
    calls: list[Any] = []
    if "weather" in question.lower() or "raining" in question.lower():
        for city in _CITIES:
            if city in question:
                calls.append(call("get_weather", {"city": city}, id=f"call_weather_{city.lower()}"))
    money = re.search(r"(\d+) (USD|EUR)", question)
    if money is not None or "in euros" in question:
        amount = int(money.group(1)) if money else 0
        source = money.group(2) if money else "USD"
        target = "JPY" if "yen" in question else "EUR"
        calls.append(
            call(
                "convert_currency",
                {"amount": amount, "source": source, "target": target},
                id=f"call_convert_{source.lower()}_{target.lower()}",
            )
        )
    return calls


def _answer(question: str, results: dict[str, str]) -> str:
    """The final answer from the tool results (tool call id -> result)."""
    parts = []
    for call_id, result in results.items():
        if call_id.startswith("call_weather_"):
            city = call_id.removeprefix("call_weather_").capitalize()
            if result.startswith("no weather data"):
                parts.append(f"I don't have weather data for {city}; it may not be a real place.")
            else:
                sky, celsius = result.split(", ")
                parts.append(f"The weather in {city} right now: {sky}, {celsius}.")
        else:
            converted = result.split(" = ")[1]
            parts.append(f"That is {converted.replace('.00', '')}.")
    return " ".join(parts)


def _verdict(request: dict[str, Any]) -> Reply:
    answer = re.search(r"<answer>\n(.*)\n</answer>", request["messages"][-1]["content"], re.DOTALL)
    text = answer.group(1) if answer else ""
    invented = "°C" in text and "don't have" in text
    verdict = {
        "pass": bool(text) and not invented,
        "reason": "Answers the question with the tools' facts." if text else "No answer.",
    }
    return Reply(json.dumps(verdict))


def brain(request: dict[str, Any]) -> Reply:
    """Answer one Chat Completions request like a capable model would."""
    messages = request["messages"]
    if messages[0]["role"] == "system" and "You grade the answer" in messages[0]["content"]:
        return _verdict(request)
    last = messages[-1]
    if last["role"] == "user":
        question = last["content"]
        if "French" in question:
            return Reply('"Good morning" in French is "Bonjour".')
        return Reply(tool_calls=_user_calls(question))
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    return Reply(_answer(question, results))


def record(folder: Path) -> subprocess.CompletedProcess[str]:
    """Record the sample's cassettes into ``folder``, through the sample itself."""
    with FakeOpenAIServer(handler=brain) as server:
        return subprocess.run(
            [sys.executable, str(SAMPLES / "eval_suite.py"), "--record", "--cassettes", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=clean_env({"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url}),
        )


if __name__ == "__main__":
    done = record(CASSETTES)
    print(done.stdout, done.stderr)
    raise SystemExit(done.returncode)
