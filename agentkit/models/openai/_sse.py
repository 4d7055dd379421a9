"""Server-Sent Events decoding for streamed chat completions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["SSEError", "iter_sse_data", "sse_payloads"]

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class SSEError(bytes):
    """The payload of an error event: an ``error:`` field, or ``data`` of ``event: error``.

    llama.cpp's server (2025 builds) reports a failure inside a stream as a non-standard
    ``error: {...}`` line; some proxies send ``event: error`` with the JSON as data.
    """

    __slots__ = ()


def iter_sse_data(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Yield the ``data`` of each Server-Sent Event in a byte stream cut at arbitrary points.

    Follows the SSE format: lines end with LF, CRLF or CR; a blank line ends an event; the
    ``data:`` lines of an event are joined with LF (one space after the colon is dropped);
    lines starting with ``:`` are comments (keep-alives) and other fields are ignored. An
    event left unfinished when the bytes end is dropped, as the format requires. Events
    without data are skipped.
    """
    return sse_payloads(chunks, errors=False)


def sse_payloads(chunks: Iterable[bytes], errors: bool = True) -> Iterator[bytes]:
    """Like :func:`iter_sse_data`, but with ``errors`` an error event yields an :class:`SSEError`.

    The payload of an event with an ``error`` field is that field's value (joined like
    ``data`` lines); an event of type ``error`` yields its data as an :class:`SSEError`.
    """
    parts: list[bytes] = []  # the unfinished last line, in pieces
    data: list[bytes] = []
    error: list[bytes] = []
    error_event = False
    at_end = False
    chunks = iter(chunks)
    while not at_end:
        chunk = next(chunks, None)
        if chunk is None:
            if not parts:
                return
            # At the end a held-back CR is a line break after all; text after the last
            # line break is an unfinished line and is dropped.
            at_end = True
            lines = _LINE_BREAK.split(b"".join(parts))
            lines.pop()
        elif b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                parts.append(chunk)
            continue
        else:
            if parts:
                parts.append(chunk)
                chunk = b"".join(parts)
                parts = []
            if b"\r" in chunk:
                held = chunk.endswith(b"\r")  # may be the first half of a CRLF: decide later
                lines = _LINE_BREAK.split(chunk[:-1] if held else chunk)
                rest = lines.pop() + (b"\r" if held else b"")
            else:
                lines = chunk.split(b"\n")
                rest = lines.pop()
            if rest:
                parts.append(rest)
        for line in lines:
            if not line:
                if error:
                    yield SSEError(b"\n".join(error))
                    error = []
                    data = []
                elif data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                    if payload:
                        yield SSEError(payload) if error_event else payload
                error_event = False
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line == b"data":
                data.append(b"")
            elif not errors:
                continue
            elif line.startswith(b"error:"):
                error.append(line[7:] if line[6:7] == b" " else line[6:])
            elif line.startswith(b"event:"):
                error_event = line[6:].strip() == b"error"
