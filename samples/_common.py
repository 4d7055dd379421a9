"""Shared by the samples: pick a real model when an API key is set, else a scripted one."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence

from agentkit import AgentEvent, Message, Runner, print_events
from agentkit.models import ChatModel, ScriptedChatModel


def live() -> bool:
    """``True`` when the samples should call a real OpenAI-compatible endpoint."""
    return bool(os.environ.get("OPENAI_API_KEY"))


def make_model(script: Sequence[object] | Callable[[list[Message]], Message | str]) -> ChatModel:
    """A real model when ``OPENAI_API_KEY`` is set, otherwise ``ScriptedChatModel(script)``.

    The real model is ``AGENTKIT_MODEL`` (default ``gpt-4o-mini``) at ``OPENAI_BASE_URL``
    (default OpenAI's), so any OpenAI-compatible server works (vLLM, Ollama, DeepSeek, ...).
    """
    if live():
        from agentkit.models import OpenAIChatModel

        return OpenAIChatModel(os.environ.get("AGENTKIT_MODEL", "gpt-4o-mini"))
    return ScriptedChatModel(script)  # type: ignore[arg-type]


def sample_args(
    doc: str | None, default: str | Sequence[str], argv: Sequence[str] | None
) -> argparse.Namespace:
    """Parse a sample's command line: the question(s) (``args.questions``) and ``--no-stream``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    many = not isinstance(default, str)
    parser.add_argument(
        "questions", nargs="*" if many else "?", default=default if not many else None,
        help="what to ask (default: an example)",
    )
    parser.add_argument("--no-stream", action="store_true", help="do not stream model output")
    args = parser.parse_args(argv)
    if not many:
        args.questions = [args.questions]
    elif not args.questions:
        args.questions = list(default)
    return args


def banner(title: str) -> None:
    """Print the sample's title and whether it runs live or offline."""
    mode = "live" if live() else "offline (scripted models; set OPENAI_API_KEY to go live)"
    print(f"agentkit {title}, {mode}")


def ask(runner: Runner, question: str, *, show_run_path: bool = False) -> list[AgentEvent]:
    """Run ``question``, print the run live, and exit with the error if the run failed."""
    print(f"> {question}")
    events = print_events(runner.query(question), show_run_path=show_run_path)
    failed = [event for event in events if event.err is not None]
    if failed:
        print(json.dumps(failed[-1].to_dict(), indent=2), file=sys.stderr)
        raise SystemExit(1)
    return events
