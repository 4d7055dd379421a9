"""The cassette file: what one recorded model call looks like, and how a file is read and written.

A cassette is one document with a format version and the list of recorded calls
(``interactions``), in JSON (``.json``, indented) or YAML (``.yaml``/``.yml``, needs PyYAML).
Each interaction is::

    request:
      messages: [...]   # Message.to_dict() without response_meta and stream indexes
      tools: [...]      # name, description, parameters (JSON Schema)
      options: {...}    # the ModelOptions fields that were set
      stream: true      # how it was called (not part of the match)
    reply:              # one of:
      message: {...}    #   a whole reply (generate)
      chunks: [...]     #   a streamed reply, chunk by chunk
      error: {...}      #   the ModelError the call raised (after the chunks, for a stream)

Keys are written in a fixed order and free-form mappings (tool parameters, ``extra`` fields)
sorted, so recording the same calls twice writes the same bytes and a change shows as a small
diff. Files written by this version carry ``agentkit_cassette: 1``; later versions keep reading
them.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from agentkit import errors
from agentkit.errors import AgentKitValueError
from agentkit.models._base import ModelOptions
from agentkit.schema import Message, ToolInfo
from agentkit.testing._errors import CassetteError

FORMAT_VERSION = 1
_VERSION_KEY = "agentkit_cassette"
_JSON_SUFFIXES = (".json",)
_YAML_SUFFIXES = (".yaml", ".yml")

# The model errors a cassette can replay, by name; a subclass is recorded as its nearest one.
_MODEL_ERRORS: dict[str, type[errors.ModelError]] = {
    cls.__name__: cls
    for cls in (
        errors.ModelError,
        errors.APIConnectionError,
        errors.APITimeoutError,
        errors.IncompleteStreamError,
        errors.ResponseTooLargeError,
        errors.APIStatusError,
        errors.BadRequestError,
        errors.AuthenticationError,
        errors.PermissionDeniedError,
        errors.RateLimitError,
    )
}


# --- records ---------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` as JSON data with every mapping's keys sorted (a stable order on disk)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(key): plain(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if attrs.has(type(value)):
        return plain(attrs.asdict(value, recurse=False))
    return repr(value)


def message_record(message: Message, *, max_inline_bytes: int | None = None) -> dict[str, Any]:
    """A reply message or chunk, as written (``Message.from_dict`` reads it back exactly)."""
    data = message.to_dict(max_inline_bytes=max_inline_bytes)
    if "extra" in data:
        data["extra"] = plain(data["extra"])
    for call in data.get("tool_calls", ()):
        if "extra" in call:
            call["extra"] = plain(call["extra"])
    return data


def _request_message(message: Message) -> dict[str, Any]:
    # What a model server sees of a message: usage and stream indexes are not sent, and they
    # differ between a streamed and a whole reply of the same content. Media are recorded by
    # size and SHA-256: a request matches on the very bytes, but a cassette does not hold an
    # image again for every call that sends the conversation.
    data = message_record(message, max_inline_bytes=0)
    data.pop("response_meta", None)
    for call in data.get("tool_calls", ()):
        call.pop("index", None)
    return data


def request_record(
    messages: Sequence[Message],
    tools: Sequence[ToolInfo],
    options: ModelOptions | None,
    stream: bool,
) -> dict[str, Any]:
    """The request of one call, as written and compared."""
    set_options: dict[str, Any] = {}
    if options is not None:
        for field in attrs.fields(ModelOptions):
            value = getattr(options, field.name)
            if value is not None:
                set_options[field.name] = plain(value)
    return {
        "messages": [_request_message(message) for message in messages],
        "tools": [
            {
                "name": tool.name,
                "description": tool.description,
                "parameters": plain(tool.parameters),
                # Only when set: the cassettes recorded before deferral existed still match.
                **({"deferred": True} if tool.deferred else {}),
            }
            for tool in tools
        ],
        "options": set_options,
        "stream": stream,
    }


def match_key(request: dict[str, Any]) -> str:
    """What two requests must share to match: all of it but how the call was made."""
    return json.dumps(
        {key: value for key, value in request.items() if key != "stream"},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def request_lines(request: dict[str, Any]) -> list[str]:
    """The request as indented JSON lines, for a readable diff."""
    shown = {key: value for key, value in request.items() if key != "stream"}
    # split("\n"), not splitlines(): text may hold other line separators (\x85, \u2028).
    return json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False).split("\n")


def error_record(error: errors.ModelError) -> dict[str, Any]:
    """A model error as written: its nearest replayable class, message, status and body."""
    name = next(cls.__name__ for cls in type(error).__mro__ if cls.__name__ in _MODEL_ERRORS)
    data: dict[str, Any] = {"type": name, "message": str(error)}
    if error.status_code is not None:
        data["status_code"] = error.status_code
    if error.body is not None:
        data["body"] = plain(error.body)
    if isinstance(error, errors.ResponseTooLargeError):
        data["limit"] = error.limit
        data["received"] = error.received
    return data


def error_from_record(data: dict[str, Any]) -> errors.ModelError:
    """The error a recorded failed call raises again."""
    cls = _MODEL_ERRORS.get(str(data.get("type")), errors.ModelError)
    message = str(data.get("message", "the recorded model call failed"))
    status = data.get("status_code")
    if cls is errors.ResponseTooLargeError:
        return errors.ResponseTooLargeError(
            message,
            limit=int(data.get("limit", 0)),
            received=int(data.get("received", 0)),
            status_code=status,
        )
    return cls(message, status_code=status, body=data.get("body"))


# --- files -----------------------------------------------------------------------------------


@attrs.frozen
class CassetteFormat:
    """How a cassette path is read and written, chosen by its suffix."""

    yaml: bool

    @classmethod
    def of(cls, path: Path) -> CassetteFormat:
        """The format of ``path``.

        Raises:
            ValueError: the suffix is neither ``.json`` nor ``.yaml``/``.yml``.
        """
        suffix = path.suffix.lower()
        if suffix in _JSON_SUFFIXES:
            return cls(yaml=False)
        if suffix in _YAML_SUFFIXES:
            _yaml()  # fail now, not at the first write, when PyYAML is missing
            return cls(yaml=True)
        raise AgentKitValueError(
            f"a cassette file must end in .json or .yaml/.yml (got {str(path)!r}); the suffix "
            "chooses the format"
        )

    def block(self, interaction: dict[str, Any]) -> str:
        """One interaction as the text it has in the file (cached by the caller).

        A stream's chunks are written one per line, so a long reply stays short on screen.
        """
        reply = interaction.get("reply", {})
        chunks = reply.get("chunks")
        if self.yaml:
            if chunks:
                interaction = {
                    **interaction,
                    "reply": {**reply, "chunks": [_one_line(chunk) for chunk in chunks]},
                }
            text: str = _yaml().dump([interaction], Dumper=_yaml_dumper(), **_YAML_OPTIONS)
            return text.rstrip("\n")
        if chunks:
            marks = [f"\u0000chunk {number}\u0000" for number in range(len(chunks))]
            interaction = {**interaction, "reply": {**reply, "chunks": marks}}
        inner = json.dumps(interaction, indent=2, ensure_ascii=False)
        for mark, chunk in zip(marks if chunks else (), chunks or (), strict=True):
            inner = inner.replace(
                json.dumps(mark), json.dumps(chunk, ensure_ascii=False), 1
            )
        return "\n".join("    " + line for line in inner.split("\n"))

    def document(self, blocks: Sequence[str]) -> str:
        """The whole file, from the blocks of its interactions."""
        if self.yaml:
            body = "\n".join(blocks) if blocks else "[]"
            if blocks:
                return f"{_VERSION_KEY}: {FORMAT_VERSION}\ninteractions:\n{body}\n"
            return f"{_VERSION_KEY}: {FORMAT_VERSION}\ninteractions: []\n"
        if not blocks:
            return f'{{\n  "{_VERSION_KEY}": {FORMAT_VERSION},\n  "interactions": []\n}}\n'
        return (
            f'{{\n  "{_VERSION_KEY}": {FORMAT_VERSION},\n  "interactions": [\n'
            + ",\n".join(blocks)
            + "\n  ]\n}\n"
        )

    def load(self, path: Path) -> list[dict[str, Any]]:
        """The interactions recorded in ``path``.

        Raises:
            CassetteError: the file cannot be read, is not a cassette, or is from a later
                format version.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise CassetteError(f"cannot read the cassette {str(path)!r}: {error}") from error
        try:
            data = _yaml().safe_load(text) if self.yaml else json.loads(text)
        except Exception as error:  # JSON and YAML parsers raise their own error types
            raise CassetteError(
                f"the cassette {str(path)!r} is not valid {'YAML' if self.yaml else 'JSON'}: "
                f"{error}; re-record it with mode='record'"
            ) from error
        return _interactions(data, path)

    def write(self, path: Path, blocks: Sequence[str]) -> None:
        """Replace ``path`` with a cassette of ``blocks`` (atomically: a reader never sees half)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
                file.write(self.document(blocks))
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _interactions(data: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or _VERSION_KEY not in data:
        raise CassetteError(
            f"{str(path)!r} is not an agentkit cassette (no {_VERSION_KEY!r} key); re-record "
            "it with mode='record'"
        )
    version = data[_VERSION_KEY]
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise CassetteError(
            f"the cassette {str(path)!r} has format version {version!r}; this agentkit reads "
            f"versions 1 to {FORMAT_VERSION} (upgrade agentkit, or re-record the cassette)"
        )
    interactions = data.get("interactions")
    if not isinstance(interactions, list):
        raise CassetteError(f"the cassette {str(path)!r} has no list of interactions")
    for number, item in enumerate(interactions, 1):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("request"), dict)
            and isinstance(item.get("reply"), dict)
            and isinstance(item["request"].get("messages"), list)
        ):
            raise CassetteError(
                f"interaction {number} of the cassette {str(path)!r} is damaged: it needs a "
                "request with messages and a reply; re-record the cassette"
            )
    return interactions


# --- YAML, imported only for YAML cassettes ----------------------------------------------------

_YAML_OPTIONS: dict[str, Any] = {
    "sort_keys": False,
    "allow_unicode": True,
    "default_flow_style": False,
    "width": 1_000_000,  # a chunk stays on one line
}


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise CassetteError(
            "YAML cassettes need PyYAML: pip install 'agentkit[evals]' (or pyyaml), or use a "
            ".json cassette"
        ) from None
    return yaml


@functools.lru_cache(maxsize=1)
def _yaml_dumper() -> Any:
    yaml = _yaml()

    class _Dumper(yaml.SafeDumper):  # type: ignore[misc,name-defined]
        """Writes text with line breaks as a literal block, readable in a diff."""

    def text(dumper: Any, value: str) -> Any:
        style = None
        if _needs_escapes(value):
            style = '"'
        elif "\n" in value and _block_safe(value):
            style = "|"
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    def flow(dumper: Any, value: _FlowMapping) -> Any:
        return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=True)

    def quoted(dumper: Any, value: _Quoted) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style='"')

    _Dumper.add_representer(str, text)
    _Dumper.add_representer(_FlowMapping, flow)
    _Dumper.add_representer(_Quoted, quoted)
    return _Dumper


def _one_line(value: Any) -> Any:
    """``value`` marked to be written on one line in YAML (line breaks as ``\\n``)."""
    if isinstance(value, dict):
        return _FlowMapping({key: _one_line(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_one_line(item) for item in value]
    if isinstance(value, str) and ("\n" in value or _needs_escapes(value)):
        return _Quoted(value)
    return value


class _Quoted(str):
    """Text YAML writes double-quoted, its line breaks escaped."""

    __slots__ = ()


class _FlowMapping(dict):  # type: ignore[type-arg]
    """A mapping YAML writes on one line (a stream chunk)."""


# Characters YAML reads as line breaks or byte-order marks, or cannot hold unescaped.
_SPECIAL = frozenset("\r\x85\u2028\u2029\ufeff\x7f")


def _needs_escapes(value: str) -> bool:
    """Text that only a double-quoted YAML scalar, with escapes, keeps exactly."""
    return any(
        char in _SPECIAL or (char < " " and char not in "\n\t") or "\x80" <= char < "\xa0"
        for char in value
    )


def _block_safe(value: str) -> bool:
    # A literal block cannot keep trailing spaces or tabs on a line; such text is written
    # quoted instead, which round-trips exactly.
    return not any(line != line.rstrip(" \t") for line in value.split("\n"))
