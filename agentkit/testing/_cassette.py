"""Record a model's calls to a file and replay them offline: :func:`cassette`.

A :class:`Cassette` is a :class:`~agentkit.models.ToolCallingChatModel` wrapped around
another model. Recording, it passes every call on and writes the request and the reply
(chunk by chunk for a stream, the error for a failed call) to the file; replaying, it answers
from the file and never calls the model. The file format is in ``_cassette_file``; what is
never written, in ``_redact``.

How calls find their recording: a call's request (messages, tools, options; whether it
streams does not count) is compared with the recorded ones. With ``match="request"`` (the
default) a call gets the first recorded call with the same request that was not replayed
yet, so a run whose calls come from several threads at once (parallel tool rounds, Parallel
branches) replays whatever order its threads reach the model in, and identical requests are
answered in the order they were recorded. With ``match="order"`` the n-th call must be the
n-th recorded one (for runs that call the model from one thread only).
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentkit.errors import AgentKitTypeError, AgentKitValueError, ModelError
from agentkit.models._base import ChatModel, ModelOptions, ToolCallingChatModel
from agentkit.schema import Message, ToolInfo, concat_messages
from agentkit.streams import StreamReader, stream_from_iterator, stream_from_list
from agentkit.testing._cassette_file import (
    CassetteFormat,
    error_from_record,
    error_record,
    match_key,
    message_record,
    request_lines,
    request_record,
)
from agentkit.testing._errors import CassetteError, CassetteMismatchError, CassetteUnplayedError
from agentkit.testing._redact import Redactor, Scrub

MODES = ("record", "replay", "record-missing")
MATCHES = ("request", "order")
_DIFF_LINES = 120


def cassette(
    model: ChatModel | None,
    path: str | os.PathLike[str],
    *,
    mode: str = "replay",
    match: str = "request",
    scrub: Scrub | None = None,
    redact: Iterable[str | re.Pattern[str]] = (),
) -> Cassette:
    """Wrap ``model`` to record its calls to ``path``, or to replay them from it offline.

    Modes:

    * ``"record"``: every call goes to ``model``; the file is replaced by the calls of this
      cassette, written after each call (so nothing recorded is lost if the process dies).
    * ``"replay"`` (default): every call is answered from the file; ``model`` is never called
      and may be ``None``. A call that was not recorded raises
      :class:`~agentkit.testing.CassetteMismatchError` with a diff against the closest
      recorded request.
    * ``"record-missing"``: recorded calls are replayed, the others go to ``model`` and are
      added to the file.

    The file is JSON (``.json``) or YAML (``.yaml``/``.yml``, needs PyYAML), one entry per
    call with its request (messages, tools, options) and reply (the message; a stream's
    chunks; the :class:`~agentkit.ModelError` a failed call raised, which a replay raises
    again). Keys come in a stable order, so a re-recording shows as a readable diff.

    Secrets are never written, wherever they travel (the user's text, a tool's result, the
    model's reply, tool arguments): values under credential keys (``Authorization``,
    ``api_key``, ...), bearer tokens, strings shaped like API keys and tokens (``sk-...``,
    ``sk_live_...``, ``glpat-...``, JSON Web Tokens, ...), the bodies of PEM private keys,
    values given to secret-looking names in text (``password: ...``,
    ``aws_secret_access_key = ...``) and the values of secret environment variables
    (``OPENAI_API_KEY``, ...) are replaced by ``<redacted>``.
    ``redact`` adds regular expressions (strings or compiled): a match is replaced by
    ``<redacted>``, or only its group named ``secret`` if it has one
    (``r"pin (?P<secret>[0-9]{4})"``). ``scrub(text) -> text`` redacts more: it runs on every
    string of a record, and on every live request before it is compared, so a scrubbed request
    still matches. It must give the same result when run twice (a replayed reply, already
    scrubbed, comes back in the next request).

    How a call finds its recording: its request (messages, tools, options; whether it
    streams does not count) is compared with the recorded ones. With ``match="request"``
    (default) it gets the first recorded call with the same request not replayed yet, so
    calls from several threads at once (parallel tool calls, ``ParallelAgent`` branches)
    replay in whatever order the threads come, and identical requests are answered in
    recorded order. With ``match="order"`` the n-th call must be the n-th recorded one.
    A recorded stream answers ``generate`` with its chunks joined; a recorded whole reply
    answers ``stream`` in one chunk.

    Example::

        model = cassette(OpenAIChatModel("gpt-4o-mini"), "tests/cassettes/weather.json",
                         mode="record")           # once, with a real key
        model = cassette(None, "tests/cassettes/weather.json")   # offline, in CI

    Raises:
        ValueError: an unknown mode or match, a path that is neither JSON nor YAML, or a
            ``redact`` string that is not a regular expression.
        TypeError: a recording mode without a model, or ``redact`` given one pattern
            instead of a list.
        CassetteError: replaying a file that does not exist or cannot be read.
    """
    if mode not in MODES:
        raise AgentKitValueError(
            f"mode must be one of {', '.join(map(repr, MODES))} (got {mode!r})"
        )
    if match not in MATCHES:
        raise AgentKitValueError(
            f"match must be one of {', '.join(map(repr, MATCHES))} (got {match!r})"
        )
    if mode != "replay" and model is None:
        raise AgentKitTypeError(
            f"cassette(mode={mode!r}) calls the model, so it needs one (got None); pass the "
            "real model, or use mode='replay'"
        )
    if model is not None and not isinstance(model, ChatModel):
        raise AgentKitTypeError(
            f"cassette() wraps a ChatModel (an object with generate and stream), got "
            f"{type(model).__name__}"
        )
    tape = _Tape(Path(path), mode, match, Redactor(scrub, patterns=redact))
    return Cassette(tape, model)


class _Tape:
    """The recorded calls and the state of one cassette, shared by its tool-bound copies.

    Every field is read and written under ``lock``; model calls happen outside it.
    """

    __slots__ = (
        "blocks",
        "calls",
        "format",
        "keys",
        "lock",
        "match",
        "mode",
        "new",
        "path",
        "recorded",
        "redactor",
        "started",
        "unplayed_by_key",
        "used",
    )

    def __init__(self, path: Path, mode: str, match: str, redactor: Redactor) -> None:
        self.lock = threading.Lock()
        self.path = path
        self.format = CassetteFormat.of(path)
        self.mode = mode
        self.match = match
        self.redactor = redactor
        self.recorded: list[dict[str, Any]] = []
        if mode == "replay" and not path.exists():
            raise CassetteError(
                f"there is no cassette at {str(path)!r} to replay; record it first with "
                "mode='record' and a real model (pytest: --cassette-mode=record)"
            )
        if mode != "record" and path.exists():
            self.recorded = self.format.load(path)
        self.keys = [match_key(item["request"]) for item in self.recorded]
        self.used = [False] * len(self.recorded)
        self.unplayed_by_key: dict[str, deque[int]] = {}
        for index, key in enumerate(self.keys):
            self.unplayed_by_key.setdefault(key, deque()).append(index)
        # What the file holds: the recorded blocks kept (record-missing), then the new calls
        # in the order they started (a call still running has no block yet).
        self.blocks = [self.format.block(item) for item in self.recorded]
        self.new: dict[int, str] = {}
        self.started = 0
        self.calls = 0

    # -- replay ----------------------------------------------------------------------------

    def take(self, key: str) -> tuple[int, dict[str, Any] | None]:
        """Count a call; return its number and the recorded reply it gets, if any."""
        with self.lock:
            self.calls += 1
            number = self.calls
            if self.match == "order":
                index = next((i for i, used in enumerate(self.used) if not used), None)
                if index is None or self.keys[index] != key:
                    return number, None
                self.unplayed_by_key[key].remove(index)
            else:
                waiting = self.unplayed_by_key.get(key)
                if not waiting:
                    return number, None
                index = waiting.popleft()
            self.used[index] = True
            return number, self.recorded[index]["reply"]

    def mismatch(self, number: int, request: dict[str, Any], streaming: bool) -> CassetteError:
        """The error of call ``number``, which has no recording."""
        with self.lock:
            candidates = [i for i, used in enumerate(self.used) if not used]
            if self.match == "order":
                candidates = candidates[:1]
            total = len(self.recorded)
            snapshot = [(i, self.recorded[i]["request"]) for i in candidates]
        where = f"cassette {str(self.path)!r}"
        how = "stream" if streaming else "generate"
        fix = (
            "If the change is intended, record the cassette again: mode='record', or "
            "mode='record-missing' to keep the calls that still match (pytest: "
            "--cassette-mode=record)."
        )
        if not snapshot:
            last = request["messages"][-1] if request["messages"] else {}
            return CassetteMismatchError(
                f"{where}: call {number} ({how}) was not recorded: all {total} recorded "
                f"call(s) were replayed already. It ends with this message: "
                f"{_short(str(last.get('content', '')))!r} ({last.get('role', '?')}). {fix}",
                path=str(self.path),
            )
        live = request_lines(request)
        index, recorded = max(
            snapshot, key=lambda item: (_similarity(request_lines(item[1]), live), -item[0])
        )
        diff_lines = list(
            difflib.unified_diff(
                request_lines(recorded),
                live,
                f"recorded call {index + 1}",
                f"call {number} of this run",
                lineterm="",
            )
        )
        if len(diff_lines) > _DIFF_LINES:
            hidden = len(diff_lines) - _DIFF_LINES
            diff_lines = [*diff_lines[:_DIFF_LINES], f"... ({hidden} more diff lines)"]
        diff = "\n".join(diff_lines)
        rule = "the next recorded call" if self.match == "order" else "any recorded call"
        return CassetteMismatchError(
            f"{where}: call {number} ({how}) does not match {rule}. The closest is recorded "
            f"call {index + 1}; the request differs (- recorded, + this call):\n{diff}\n{fix}",
            path=str(self.path),
            diff=diff,
        )

    # -- record ----------------------------------------------------------------------------

    def count(self) -> int:
        """Count a call that is not looked up (recording everything); return its number."""
        with self.lock:
            self.calls += 1
            return self.calls

    def reserve(self) -> int:
        """Reserve the place of a call that goes to the model (its position in the file)."""
        with self.lock:
            self.started += 1
            return self.started

    def finish(self, slot: int, request: dict[str, Any], reply: dict[str, Any]) -> None:
        """Record a finished call (its reply redacted) and rewrite the file."""
        interaction = {"request": request, "reply": self.redactor.data(reply)}
        block = self.format.block(interaction)
        with self.lock:
            self.new[slot] = block
            blocks = self.blocks + [self.new[key] for key in sorted(self.new)]
            self.format.write(self.path, blocks)

    # -- accounting --------------------------------------------------------------------------

    def unplayed(self) -> list[int]:
        with self.lock:
            return [i for i, used in enumerate(self.used) if not used]


def _similarity(a: list[str], b: list[str]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Cassette:
    """A model that records its calls to a cassette file, or replays them (see :func:`cassette`).

    It is a :class:`~agentkit.models.ToolCallingChatModel`: :meth:`with_tools` returns a
    cassette bound to the tools (the wrapped model bound to them too, when recording) that
    shares the file and the replay position. Thread-safe.
    """

    __slots__ = ("_model", "_tape", "_tools")

    def __init__(
        self, tape: _Tape, model: ChatModel | None, tools: Sequence[ToolInfo] = ()
    ) -> None:
        self._tape = tape
        self._model = model
        self._tools = list(tools)

    @property
    def path(self) -> Path:
        """The cassette file."""
        return self._tape.path

    @property
    def mode(self) -> str:
        """``"record"``, ``"replay"`` or ``"record-missing"``."""
        return self._tape.mode

    @property
    def calls(self) -> int:
        """How many calls this cassette (and its tool-bound copies) received."""
        with self._tape.lock:
            return self._tape.calls

    @property
    def unplayed(self) -> int:
        """How many calls read from the file were not replayed (yet)."""
        return len(self._tape.unplayed())

    def assert_all_played(self) -> None:
        """Fail if a call read from the file was never replayed (the agent made fewer calls).

        Raises:
            CassetteUnplayedError: naming the calls that were not replayed (an
                :class:`AssertionError` and a :class:`CassetteError`).
        """
        left = self._tape.unplayed()
        if left:
            numbers = ", ".join(str(index + 1) for index in left)
            raise CassetteUnplayedError(
                f"cassette {str(self.path)!r}: {len(left)} recorded call(s) were never "
                f"replayed (call {numbers}); the agent made fewer or other calls than when "
                "it was recorded"
            )

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolCallingChatModel:
        """Return a cassette bound to ``tools``, sharing this one's file and position.

        Raises:
            TypeError: recording, and the wrapped model cannot be bound to tools.
        """
        model = self._model
        if model is not None:
            if not isinstance(model, ToolCallingChatModel):
                if self._tape.mode != "replay":
                    raise AgentKitTypeError(
                        f"the model given to cassette() ({type(model).__name__}) cannot be "
                        "bound to tools: it has no with_tools()"
                    )
            else:
                model = model.with_tools(tools)
        return Cassette(self._tape, model, tools)

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Answer from the cassette, or call the model and record the call (see the modes)."""
        request, key = self._request(messages, options, streaming=False)
        number, reply = self._lookup(key)
        if reply is not None:
            return _replay_whole(reply)
        self._check_may_record(number, request, streaming=False)
        return self._record_whole(request, messages, options)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Like :meth:`generate`, as a stream: a recorded stream replays chunk by chunk."""
        request, key = self._request(messages, options, streaming=True)
        number, reply = self._lookup(key)
        if reply is not None:
            return _replay_stream(reply)
        self._check_may_record(number, request, streaming=True)
        return self._record_stream(request, messages, options)

    # -- the steps of a call ---------------------------------------------------------------

    def _request(
        self, messages: Sequence[Message], options: ModelOptions | None, *, streaming: bool
    ) -> tuple[dict[str, Any], str]:
        request = self._tape.redactor.request(
            request_record(messages, self._tools, options, streaming)
        )
        return request, match_key(request)

    def _lookup(self, key: str) -> tuple[int, dict[str, Any] | None]:
        tape = self._tape
        if tape.mode == "record":
            return tape.count(), None
        return tape.take(key)

    def _check_may_record(self, number: int, request: dict[str, Any], *, streaming: bool) -> None:
        if self._tape.mode == "replay":
            raise self._tape.mismatch(number, request, streaming)

    def _live(self) -> ChatModel:
        if self._model is None:  # cassette() refuses this for the recording modes
            raise CassetteError("this cassette has no model to record with")
        return self._model

    def _record_whole(
        self, request: dict[str, Any], messages: Sequence[Message], options: ModelOptions | None
    ) -> Message:
        tape = self._tape
        slot = tape.reserve()
        try:
            reply = self._live().generate(messages, options)
        except ModelError as error:
            tape.finish(slot, request, {"error": error_record(error)})
            raise
        tape.finish(slot, request, {"message": message_record(reply)})
        return reply

    def _record_stream(
        self, request: dict[str, Any], messages: Sequence[Message], options: ModelOptions | None
    ) -> StreamReader[Message]:
        tape = self._tape
        slot = tape.reserve()
        try:
            source = self._live().stream(messages, options)
        except ModelError as error:
            tape.finish(slot, request, {"error": error_record(error)})
            raise
        chunks: list[Message] = []

        def pump() -> Iterator[Message]:
            try:
                for chunk in source:
                    chunks.append(chunk)
                    yield chunk
            except ModelError as error:
                tape.finish(
                    slot,
                    request,
                    {"chunks": [message_record(c) for c in chunks], "error": error_record(error)},
                )
                raise
            # A stream read to its end is recorded; one closed early (a cancel) is not: its
            # reply is unknown.
            tape.finish(slot, request, {"chunks": [message_record(c) for c in chunks]})

        return stream_from_iterator(pump(), on_close=source.close, abort=source.close)

    def __repr__(self) -> str:
        tape = self._tape
        with tape.lock:
            played = sum(tape.used)
            total = len(tape.recorded)
        return (
            f"Cassette({str(tape.path)!r}, mode={tape.mode!r}, {played} of {total} recorded "
            f"calls replayed, tools={len(self._tools)})"
        )


# --- replaying one reply ---------------------------------------------------------------------


def _chunks(reply: dict[str, Any]) -> list[Message]:
    return [Message.from_dict(chunk) for chunk in reply.get("chunks") or ()]


def _replay_whole(reply: dict[str, Any]) -> Message:
    if "message" in reply:
        return Message.from_dict(reply["message"])
    error = reply.get("error")
    if error is not None:
        raise error_from_record(error)
    chunks = _chunks(reply)
    if not chunks:
        raise CassetteError("a recorded reply has neither a message, chunks nor an error")
    return concat_messages(chunks)


def _replay_stream(reply: dict[str, Any]) -> StreamReader[Message]:
    if "message" in reply:
        return stream_from_list([Message.from_dict(reply["message"])])
    chunks = _chunks(reply)
    error = reply.get("error")
    if error is None:
        return stream_from_list(chunks)
    if not chunks:
        raise error_from_record(error)  # failed before the first chunk: stream() raises

    def replay() -> Iterator[Message]:
        yield from chunks
        raise error_from_record(error)

    return stream_from_iterator(replay())

