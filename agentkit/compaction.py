"""Context compaction: keep a long run's conversation within what the model can take.

Two middlewares (see :mod:`agentkit.middleware`), after Eino's ``summarization`` and
``reduction`` middlewares:

* :class:`SummarizationMiddleware` summarizes the older turns with a model once the
  conversation exceeds a token budget, and goes on with the summary plus the latest messages;
* :class:`ToolResultReductionMiddleware` cuts (or drops) large tool results once newer ones
  followed them.

Both rewrite the conversation in ``before_model``, so the change holds for the rest of the
run (the model never sees the long form again); the messages already delivered as events are
not touched. Tokens are counted by a pluggable ``counter``; the default,
:func:`approximate_tokens`, is a cheap characters-based estimate.

Example::

    agent = ChatModelAgent(
        "assistant", "helps", model, tools=[search],
        middlewares=[
            ToolResultReductionMiddleware(max_chars=2_000),
            SummarizationMiddleware(model, max_tokens=12_000),
        ],
    )
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from agentkit import _prompts_zh as zh
from agentkit._events import AgentAction, AgentEvent
from agentkit._language import resolve
from agentkit._middleware import AgentMiddleware, ModelState, send_event
from agentkit.agents._model_retry import ModelRetryConfig
from agentkit.backends import Backend, BackendError
from agentkit.backends._offload import is_pointer, offload_path, pointer
from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.models._base import ChatModel, ModelOptions
from agentkit.schema import (
    Message,
    Role,
    TextPart,
    media_tokens,
    system_message,
    user_message,
)
from agentkit.tools._base import ToolCallInfo

__all__ = [
    "SUMMARY_INSTRUCTION",
    "ClearPreCommit",
    "Finalize",
    "GenModelInput",
    "SummarizationAction",
    "SummarizationMiddleware",
    "SummarizationStep",
    "SummaryHook",
    "TokenCounter",
    "ToolRule",
    "ToolResultReductionMiddleware",
    "approximate_tokens",
]

TokenCounter = Callable[[Sequence[Message]], int]
"""``counter(messages) -> tokens``: how many tokens the model would count for ``messages``."""

SUMMARY_INSTRUCTION = (
    "You summarize the earlier part of a conversation between a user and an AI assistant "
    "that uses tools, so that the assistant can go on without it. Keep every fact, decision, "
    "number, name, open question and the results of tool calls that still matter; drop "
    "chit-chat. Answer with the summary only."
)
"""What the summarizing model is told (``SummarizationMiddleware(instruction=...)``)."""

_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
_KEPT_SKILLS_PREAMBLE = (
    "Skills loaded earlier in the conversation, whose instructions still apply:\n\n"
)
_TRANSCRIPT_NOTE = (
    "\n\nThe whole conversation this summarizes is in the file {path}; read it with the "
    "read_file tool when a detail is missing."
)

_TEXTS = {
    "en": (SUMMARY_INSTRUCTION, _SUMMARY_PREFIX, _KEPT_SKILLS_PREAMBLE, _TRANSCRIPT_NOTE),
    "zh": (zh.SUMMARY_INSTRUCTION, zh.SUMMARY_PREFIX, zh.KEPT_SKILLS_PREAMBLE, zh.TRANSCRIPT_NOTE),
}

# Set on the messages a summary makes, so that a later summary knows them.
_KEPT_SKILLS = "agentkit_kept_skills"
_SUMMARY = "agentkit_summary"
_SKILL_CUT = "\n[... skill instructions cut ...]"
_SKILL_TOKENS = 5_000
_SKILLS_TOKENS = 25_000


def approximate_tokens(messages: Sequence[Message]) -> int:
    """A cheap estimate: about four characters a token, plus a few tokens a message; images,
    files and sounds as :func:`~agentkit.schema.media_tokens` counts them (not their bytes)."""
    characters = 0
    media = 0
    for message in messages:
        characters += len(message.content)
        for call in message.tool_calls:
            characters += len(call.function.name) + len(call.function.arguments)
        if message.parts:
            media += media_tokens(message)
    return characters // 4 + 4 * len(messages) + media


Finalize = Callable[[Sequence[Message], Message], Sequence[Message]]
"""``finalize(older, summary) -> messages``: what replaces the summarized messages."""

SummaryHook = Callable[[Sequence[Message], Sequence[Message]], None]
"""``after_summarize(before, after)``: the conversation before and after a summary (read-only)."""

GenModelInput = Callable[[Message, Sequence[Message]], Sequence[Message]]
"""``gen_model_input(instruction, messages) -> input``: the summarizer's input messages, from
its system message and the messages to summarize (Eino's ``GenModelInput``)."""

SummarizationStep = Literal["before_summarize", "generate_summary", "after_summarize"]
"""The kind of a :class:`SummarizationAction` (Eino's summarization ``ActionType``)."""


@attrs.frozen
class SummarizationAction:
    """One step of a summary, as ``SummarizationMiddleware(emit_internal_events=True)``
    reports it: the ``customized_action`` of an :class:`~agentkit.AgentEvent` of the agent
    that summarizes (Eino's summarization ``CustomizedAction``).

    Such an event carries no message: it is not part of the history the agent or the next
    agents see, nor of a run's result text. Tell it apart with
    ``isinstance(event.action.customized_action, SummarizationAction)`` (``event.action`` may
    be ``None``).

    Attributes:
        kind: ``"before_summarize"`` (a trigger is met, before the summarizer is asked),
            ``"generate_summary"`` (one call of the summarizer ended, one event per attempt
            when it is retried) or ``"after_summarize"`` (the conversation was replaced).
        messages: the conversation before the summary (``"before_summarize"``) or after it
            (``"after_summarize"``); empty for ``"generate_summary"``.
        attempt: the summarizer call, 1-based (``"generate_summary"``; ``0`` otherwise).
        reply: the summarizer's reply, or ``None`` (not a ``"generate_summary"``, or the call
            failed).
        error: the exception the summarizer call raised, or ``None``.
    """

    kind: SummarizationStep
    messages: tuple[Message, ...] = attrs.field(default=(), converter=tuple)
    attempt: int = 0
    reply: Message | None = None
    error: Exception | None = attrs.field(default=None, eq=False)


class SummarizationMiddleware(AgentMiddleware):
    """Summarize older turns once the conversation is too long (Eino's ``summarization``).

    Before each model call, when a trigger is met (``counter(messages)`` above ``max_tokens``,
    or more than ``max_messages`` messages: Eino's ``TriggerCondition``, either one), the
    messages after the leading system messages are split: the latest ``keep_last`` (or a few
    more, so that a tool result is never separated from the call that asked for it) stay as
    they are; the older ones are sent to ``model`` with ``instruction`` and replaced by one
    user message holding the summary, or by what ``finalize`` makes of it. An earlier summary
    is part of what gets summarized again.

    Args:
        model: the model that writes summaries (often the agent's own, or a cheaper one; a
            :class:`~agentkit.models.FailoverChatModel` fails over to others).
        max_tokens: the token budget that triggers a summary.
        keep_last: how many of the latest messages are always kept verbatim.
        counter: counts tokens (default :func:`approximate_tokens`).
        instruction: the summarizing model's system prompt (default: :data:`SUMMARY_INSTRUCTION`,
            or its Chinese text in Chinese).
        language: the language of the default instruction and of the summary's heading,
            ``"en"`` or ``"zh"`` (``None``: the process's, :func:`agentkit.language.set_language`).
        max_messages: the number of messages that triggers a summary (with or without
            ``max_tokens``; at least one of the two is needed).
        max_input_tokens: the most tokens of older messages sent to the summarizer (Eino PR
            #1165): the oldest are left out until the rest fits (the latest older message is
            always sent). ``None``: all of them.
        retry: a :class:`~agentkit.ModelRetryConfig` for the summarizer's call (Eino's
            ``Retry``); by default a failed call fails the run.
        finalize: ``finalize(older, summary) -> messages`` replaces the summarized messages
            with what it returns instead of the default summary message (Eino's ``Finalize``).
        before_summarize: ``before_summarize(messages)``, called with the conversation before
            a summary is made (read-only).
        after_summarize: ``after_summarize(before, after)``, called with the conversation
            before and after it (read-only; Eino's ``Callback``).
        keep_skills: how many of the skills loaded in the summarized messages (by the
            ``skill_tool`` of :class:`~agentkit.middlewares.SkillMiddleware`) survive the
            summary (Eino's ``PreserveSkills``): the latest load of each, up to this many of
            the most recent, each cut to about 5,000 tokens and 25,000 in all, in one user
            message before the summary; a later summary keeps them again. ``0``: none.
        skill_tool: the name of the tool that loads skills (default ``"skill"``).
        transcript_path: where the summarized messages are kept in full (Eino's
            ``TranscriptFilePath``): the summary tells the model so, to read them back with
            ``read_file``. With ``backend``, each summary appends the messages it summarizes
            to that file; without, the path is only named (the caller keeps the file).
        backend: the :class:`~agentkit.backends.Backend` the transcript is written to. When
            it refuses the write, the summary is made without naming the file.
        gen_model_input: ``gen_model_input(instruction, messages) -> input`` builds the
            summarizer's input (Eino's ``GenModelInput``) from its system message (``instruction``
            as a :class:`~agentkit.Message`) and the messages to summarize (the older ones,
            within ``max_input_tokens``); it returns a non-empty list of messages. Default:
            the system message and one user message with the messages as a transcript.
        emit_internal_events: report each step of a summary as an event of the run (Eino's
            ``EmitInternalEvents``): a :class:`SummarizationAction` as the event's
            ``customized_action``, before the summarizer is asked, after each of its calls
            (with its reply or error), and once the conversation is replaced. The events carry
            no message, so the summarizer's reply never enters a history.

    The default summary message is a user message; the messages it replaces go to
    ``finalize`` when given (the transcript's path is then not added to its summary, as in
    Eino; the kept skills are).

    Raises:
        ValueError: no trigger, or a setting out of range.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        max_tokens: int | None = None,
        keep_last: int = 6,
        counter: TokenCounter = approximate_tokens,
        instruction: str | None = None,
        language: str | None = None,
        max_messages: int | None = None,
        max_input_tokens: int | None = None,
        retry: ModelRetryConfig | None = None,
        finalize: Finalize | None = None,
        before_summarize: Callable[[Sequence[Message]], None] | None = None,
        after_summarize: SummaryHook | None = None,
        keep_skills: int = 0,
        skill_tool: str = "skill",
        transcript_path: str | None = None,
        backend: Backend | None = None,
        gen_model_input: GenModelInput | None = None,
        emit_internal_events: bool = False,
    ) -> None:
        if isinstance(keep_skills, bool) or not isinstance(keep_skills, int) or keep_skills < 0:
            raise AgentKitValueError(f"keep_skills must be an int >= 0 (got {keep_skills!r})")
        if backend is not None and not isinstance(backend, Backend):
            raise AgentKitTypeError(f"backend must be a Backend (got {backend!r})")
        if backend is not None and not transcript_path:
            raise AgentKitValueError(
                "SummarizationMiddleware got a backend but no transcript_path: pass "
                "transcript_path=... (the file the summarized messages are written to)"
            )
        for name, value in (
            ("max_tokens", max_tokens),
            ("max_messages", max_messages),
            ("max_input_tokens", max_input_tokens),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise AgentKitValueError(f"{name} must be a positive int (got {value!r})")
        if max_tokens is None and max_messages is None:
            raise AgentKitValueError(
                "SummarizationMiddleware needs a trigger: max_tokens=..., max_messages=..., "
                "or both (a summary is made when either is exceeded)"
            )
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise AgentKitValueError(f"keep_last must be an int >= 0 (got {keep_last!r})")
        if retry is not None and not isinstance(retry, ModelRetryConfig):
            raise AgentKitTypeError(f"retry must be a ModelRetryConfig (got {retry!r})")
        for name, hook in (
            ("finalize", finalize),
            ("before_summarize", before_summarize),
            ("after_summarize", after_summarize),
            ("gen_model_input", gen_model_input),
        ):
            if hook is not None and not callable(hook):
                raise AgentKitTypeError(f"{name} must be a function (got {hook!r})")
        self.model = model
        self.max_tokens = max_tokens
        self.max_messages = max_messages
        self.max_input_tokens = max_input_tokens
        self.keep_last = keep_last
        self.counter = counter
        language = resolve(language)
        default, self._prefix, self._skills_preamble, self._transcript_note = _TEXTS[language]
        self.instruction = default if instruction is None else instruction
        self.keep_skills = keep_skills
        self.skill_tool = skill_tool
        self.transcript_path = transcript_path
        self.backend = backend
        self.retry = retry
        self.finalize = finalize
        self.before_summarize = before_summarize
        self.after_summarize = after_summarize
        self.gen_model_input = gen_model_input
        self.emit_internal_events = bool(emit_internal_events)

    def _triggered(self, messages: Sequence[Message]) -> bool:
        if self.max_messages is not None and len(messages) > self.max_messages:
            return True
        return self.max_tokens is not None and self.counter(messages) > self.max_tokens

    def _bounded(self, older: Sequence[Message]) -> Sequence[Message]:
        """``older`` without its oldest messages, until it fits ``max_input_tokens``."""
        limit = self.max_input_tokens
        if limit is None:
            return older
        start = 0
        while start < len(older) - 1 and self.counter(older[start:]) > limit:
            start += 1
        return older[start:]

    def _summarize(self, older: Sequence[Message]) -> Message:
        attempts = 0

        def generate(messages: list[Message], options: ModelOptions | None) -> Message:
            nonlocal attempts
            attempts += 1
            if not self.emit_internal_events:
                return self.model.generate(messages, options)
            try:
                reply = self.model.generate(messages, options)
            except Exception as error:
                _report("generate_summary", attempt=attempts, error=error)
                raise
            _report("generate_summary", attempt=attempts, reply=reply)
            return reply

        call = generate if self.retry is None else self.retry.wrap(generate, "summarizer")
        return call(self._model_input(older), None)

    def _model_input(self, older: Sequence[Message]) -> list[Message]:
        """The summarizer's input messages for summarizing ``older``."""
        instruction = system_message(self.instruction)
        if self.gen_model_input is None:
            return [instruction, user_message(_transcript(older))]
        built: Any = self.gen_model_input(instruction, tuple(older))
        if (
            not isinstance(built, (list, tuple))
            or not built
            or not all(isinstance(message, Message) for message in built)
        ):
            raise AgentKitTypeError(
                "SummarizationMiddleware gen_model_input must return a non-empty list of "
                f"Message, the summarizer's input (got {built!r}); for example "
                "[instruction, *messages, user_message('Summarize the conversation above.')]"
            )
        return list(built)

    def before_model(self, state: ModelState) -> None:
        """Replace the older turns by their summary when a trigger is met."""
        messages = state.messages
        if not self._triggered(messages):
            return
        start = 0
        while start < len(messages) and messages[start].role is Role.SYSTEM:
            start += 1
        split = _keep_pairs(messages, max(start, len(messages) - self.keep_last))
        older = messages[start:split]
        if not older:
            return
        before = tuple(messages)
        if self.before_summarize is not None:
            self.before_summarize(before)
        if self.emit_internal_events:
            _report("before_summarize", messages=before)
        summary = self._summarize(self._bounded(older))
        if self.finalize is not None:
            replacement = list(self.finalize(tuple(older), summary))
            if not all(isinstance(message, Message) for message in replacement):
                raise AgentKitTypeError(
                    "SummarizationMiddleware finalize must return a list of Message (got "
                    f"{replacement!r})"
                )
        else:
            text = self._prefix + summary.content.strip()
            if self.transcript_path is not None and self._write_transcript(older):
                text += self._transcript_note.format(path=self.transcript_path)
            replacement = [_tagged(user_message(text), _SUMMARY, True)]
        kept = self._kept_skills(older)
        if kept:
            replacement.insert(0, kept)
        state.messages = [*messages[:start], *replacement, *messages[split:]]
        if self.after_summarize is not None:
            self.after_summarize(before, tuple(state.messages))
        if self.emit_internal_events:
            _report("after_summarize", messages=tuple(state.messages))

    def _write_transcript(self, older: Sequence[Message]) -> bool:
        """Append ``older`` (but earlier summaries) to the transcript file; whether it is there."""
        if self.backend is None or self.transcript_path is None:
            return True  # only named: the caller keeps the file
        originals = [m for m in older if _SUMMARY not in m.extra and _KEPT_SKILLS not in m.extra]
        try:
            try:
                written = self.backend.read(self.transcript_path)
            except FileNotFoundError:
                written = ""
            separator = "\n" if written and not written.endswith("\n") else ""
            self.backend.write(
                self.transcript_path, f"{written}{separator}{_transcript(originals)}\n"
            )
        except (OSError, BackendError):
            return False
        return True

    def _kept_skills(self, older: Sequence[Message]) -> Message | None:
        """The user message that keeps the skills ``older`` loaded, or ``None``."""
        if not self.keep_skills:
            return None
        skills = _loaded_skills(older, self.skill_tool)[-self.keep_skills :]
        chosen: list[tuple[str, str]] = []
        total = 0
        for name, text in reversed(skills):  # the most recent first, within the budget
            if len(text) > _SKILL_TOKENS * 4:
                text = text[: _SKILL_TOKENS * 4 - len(_SKILL_CUT)] + _SKILL_CUT
            if total + len(text) > _SKILLS_TOKENS * 4:
                break
            total += len(text)
            chosen.insert(0, (name, text))
        if not chosen:
            return None
        sections = "\n\n---\n\n".join(f'<skill name="{n}">\n{t}\n</skill>' for n, t in chosen)
        message = user_message(
            f"<system-reminder>\n{self._skills_preamble}{sections}\n</system-reminder>"
        )
        return _tagged(message, _KEPT_SKILLS, [[n, t] for n, t in chosen])


def _report(kind: SummarizationStep, **fields: Any) -> None:
    """Send one :class:`SummarizationAction` as an event of the running agent."""
    action = SummarizationAction(kind, **fields)
    send_event(AgentEvent(action=AgentAction(customized_action=action)))


def _tagged(message: Message, key: str, value: object) -> Message:
    return attrs.evolve(message, extra={**message.extra, key: value})


def _loaded_skills(messages: Sequence[Message], tool_name: str) -> list[tuple[str, str]]:
    """``(name, instructions)`` of the skills ``messages`` loaded (or kept from an earlier
    summary), the latest load of each, oldest first."""
    asked: dict[str, str] = {}
    found: dict[str, str] = {}
    for message in messages:
        kept = message.extra.get(_KEPT_SKILLS)
        if isinstance(kept, (list, tuple)):
            for pair in kept:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    found.pop(str(pair[0]), None)
                    found[str(pair[0])] = str(pair[1])
        for made in message.tool_calls:
            if made.function.name != tool_name:
                continue
            try:
                arguments = json.loads(made.function.arguments or "{}")
            except (ValueError, RecursionError):
                continue
            if isinstance(arguments, dict) and isinstance(arguments.get("skill"), str):
                asked[made.id] = arguments["skill"]
        if message.role is Role.TOOL and message.tool_call_id in asked:
            name = asked[message.tool_call_id]
            found.pop(name, None)
            found[name] = message.content
    return list(found.items())


ToolRule = Literal["truncate", "clear", "offload", "keep"]
"""What :class:`ToolResultReductionMiddleware` does to one tool's long older results:
``"truncate"`` cuts them to ``max_chars``, ``"clear"`` replaces them by a note, ``"offload"``
writes them to the middleware's backend and replaces them by where they are (as
:class:`~agentkit.middlewares.OffloadLargeResults` does), ``"keep"`` leaves them whole."""

ClearPreCommit = Callable[[Sequence[Message], Sequence[Message]], Sequence[Message] | None]
"""``before_commit(before, after) -> messages | None``: sees the conversation before and after
a reduction, before it is committed (Eino's ``ClearPreCommit``). ``None`` commits ``after``;
a list of messages is committed instead (``before`` itself vetoes the reduction)."""

_RULES = ("truncate", "clear", "offload", "keep")
_CUT = "cut to save context]"


class ToolResultReductionMiddleware(AgentMiddleware):
    """Cut large tool results once newer tool results followed them.

    Before each model call, every tool result except the latest ``keep_last`` whose text is
    longer than ``max_chars`` is cut to ``max_chars`` characters with a note saying how long it
    was, or, with ``drop=True``, replaced by the note alone. The model keeps seeing that the
    call happened and what it was about.

    ``rules`` chooses per tool, as Eino's reduction does per tool: ``{"read_file": "clear",
    "search": "truncate", "fetch": "offload", "get_plan": "keep"}`` (a :data:`ToolRule`);
    tools it does not name follow ``drop``. ``"offload"`` writes the whole result to
    ``backend`` (at ``offload_path(call)``, by default ``large_tool_result/<call id>``) and the
    model gets where it is and its first lines, the pointer
    :class:`~agentkit.middlewares.OffloadLargeResults` gives (the agent needs a ``read_file``
    tool over the same backend to read it back); a result the backend refuses is truncated
    instead. To offload every large result as soon as a tool returns it, use
    :class:`~agentkit.middlewares.OffloadLargeResults`.

    ``before_commit`` (Eino's ``ClearPreCommit``) sees each reduction before it holds and may
    change it or veto it; the files of offloaded results are written only for what it
    commits.

    Args:
        max_chars: the longest older tool result kept whole.
        keep_last: how many of the latest tool results are never cut.
        drop: replace long older results by a note instead of cutting them.
        rules: a :data:`ToolRule` by tool name.
        backend: where ``"offload"`` writes results (needed when a rule is ``"offload"``).
        offload_path: ``offload_path(call) -> str``, where to write the result of ``call``
            (a :class:`~agentkit.ToolCallInfo`).
        before_commit: a :data:`ClearPreCommit` hook.

    Raises:
        ValueError: a setting out of range, a rule that is not a :data:`ToolRule`, or an
            ``"offload"`` rule without a backend.
    """

    def __init__(
        self,
        *,
        max_chars: int = 2_000,
        keep_last: int = 2,
        drop: bool = False,
        rules: Mapping[str, ToolRule] | None = None,
        backend: Backend | None = None,
        offload_path: Callable[[ToolCallInfo], str] | None = None,
        before_commit: ClearPreCommit | None = None,
    ) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
            raise AgentKitValueError(f"max_chars must be an int >= 0 (got {max_chars!r})")
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise AgentKitValueError(f"keep_last must be an int >= 0 (got {keep_last!r})")
        given = dict(rules or {})
        for tool_name, rule in given.items():
            if rule not in _RULES:
                raise AgentKitValueError(
                    f"the rule for tool {tool_name!r} is {rule!r}; a rule is one of "
                    f"{', '.join(map(repr, _RULES))}"
                )
            if rule == "offload" and backend is None:
                raise AgentKitValueError(
                    f"the rule for tool {tool_name!r} is 'offload', which needs a backend to "
                    "write to: pass backend=... (the one the agent's read_file tool reads)"
                )
        if backend is not None and not isinstance(backend, Backend):
            raise AgentKitTypeError(f"backend must be a Backend (got {backend!r})")
        for name, hook in (("offload_path", offload_path), ("before_commit", before_commit)):
            if hook is not None and not callable(hook):
                raise AgentKitTypeError(f"{name} must be a function (got {hook!r})")
        self.max_chars = max_chars
        self.keep_last = keep_last
        self.drop = drop
        self.rules: Mapping[str, ToolRule] = given
        self.backend = backend
        self.offload_path = offload_path
        self.before_commit = before_commit

    def before_model(self, state: ModelState) -> None:
        """Cut the long older tool results of the conversation."""
        results = [i for i, message in enumerate(state.messages) if message.role is Role.TOOL]
        older = results[: len(results) - self.keep_last] if self.keep_last else results
        messages = list(state.messages)
        default: ToolRule = "clear" if self.drop else "truncate"
        offloads: list[tuple[int, Message, str, str]] = []  # index, pointer, path, whole text
        for index in older:
            message = messages[index]
            rule = self.rules.get(message.tool_name, default)
            text = message.content
            if (
                rule == "keep"
                or len(text) <= self.max_chars
                or text.endswith(_CUT)
                or is_pointer(text)
            ):
                continue  # short, kept by its rule, or reduced already (at an earlier call)
            if rule == "offload":
                call = _call_of(messages[:index], message)
                path = (self.offload_path or _default_path)(call)
                reduced = _with_text(message, pointer(path, call.call_id, text), keep_media=True)
                offloads.append((index, reduced, path, text))
            else:
                reduced = self._cut(message, clear=rule == "clear")
            messages[index] = reduced
        if not any(a is not b for a, b in zip(messages, state.messages, strict=True)):
            return
        committed = messages
        if self.before_commit is not None:
            chosen = self.before_commit(tuple(state.messages), tuple(messages))
            if chosen is not None:
                committed = list(chosen)
                if not all(isinstance(message, Message) for message in committed):
                    raise AgentKitTypeError(
                        "ToolResultReductionMiddleware before_commit must return a list of "
                        f"Message or None (got {chosen!r})"
                    )
        if offloads and self.backend is not None:
            self._write(offloads, committed, state.messages)
        state.messages = committed

    def _write(
        self,
        offloads: Sequence[tuple[int, Message, str, str]],
        committed: list[Message],
        before: Sequence[Message],
    ) -> None:
        """Write the offloaded results ``committed`` holds; truncate those the backend refuses."""
        assert self.backend is not None
        for index, reduced, path, text in offloads:
            for position, message in enumerate(committed):
                if message is not reduced:
                    continue
                try:
                    self.backend.write(path, text)
                except (OSError, BackendError):
                    committed[position] = self._cut(before[index], clear=False)

    def _cut(self, message: Message, *, clear: bool) -> Message:
        """``message`` cut to ``max_chars`` (or, ``clear``, only a note) with the note."""
        note = f"[tool result of {len(message.content):,} characters, {_CUT}"
        text = note if clear else f"{message.content[: self.max_chars]}\n{note}"
        return _with_text(message, text, keep_media=not clear)


def _with_text(message: Message, text: str, *, keep_media: bool) -> Message:
    """``message`` with ``text`` as its text (its media kept, when ``keep_media``)."""
    if not message.parts:
        return attrs.evolve(message, content=text)
    media = tuple(p for p in message.parts if type(p) is not TextPart) if keep_media else ()
    return attrs.evolve(message, content="", parts=(TextPart(text), *media))


def _default_path(call: ToolCallInfo) -> str:
    return offload_path(call.call_id)


def _call_of(messages: Sequence[Message], result: Message) -> ToolCallInfo:
    """The call ``result`` answers, from the assistant message that made it."""
    for message in reversed(messages):
        for made in message.tool_calls:
            if made.id == result.tool_call_id:
                return ToolCallInfo.from_tool_call(made)
    return ToolCallInfo(name=result.tool_name, call_id=result.tool_call_id, arguments={})


def _keep_pairs(messages: Sequence[Message], split: int) -> int:
    """Move ``split`` back so that no tool result is kept without the call that asked for it."""
    while 0 < split < len(messages) and messages[split].role is Role.TOOL:
        split -= 1
    return split


def _transcript(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        if message.role is Role.TOOL:
            lines.append(f"[tool {message.tool_name} returned] {message.content}")
            continue
        text = message.content
        for call in message.tool_calls:
            text += f" [calls {call.function.name}({call.function.arguments})]"
        lines.append(f"[{message.role.value}] {text.strip()}")
    return "\n".join(lines)
