"""Server-Sent Events decoding for streamed chat completions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["SSEError", "iter_sse_data", "sse_batches", "sse_payloads"]

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
    for payloads in sse_batches(chunks, errors):
        yield from payloads


def sse_batches(chunks: Iterable[bytes], errors: bool = True) -> Iterator[list[bytes]]:
    """Like :func:`sse_payloads`, but yield the payloads that each piece of bytes completes.

    Pieces that complete no event (a keep-alive comment, half an event) yield nothing.
    """
    event = _Event(errors)
    data = event.data  # the same list all along: events clear it
    for lines in _lines(chunks):
        payloads: list[bytes] = []
        for line in lines:
            if line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line:
                event.field(line)
            elif len(data) == 1 and not event.error and not event.error_event:
                line = data.pop()  # the common event: one data line, no error
                if line:
                    payloads.append(line)
            else:
                payload = event.end()
                if payload is not None:
                    payloads.append(payload)
        if payloads:
            yield payloads


def _lines(chunks: Iterable[bytes]) -> Iterator[list[bytes]]:
    """Yield the complete lines of a byte stream cut at arbitrary points, a list per piece.

    Lines end with LF, CRLF or CR. A CR at the end of a piece may be the first half of a CRLF,
    so it is held back until the next piece decides; at the end of the bytes it is a line
    break after all, and text after the last line break (an unfinished line) is dropped.
    """
    parts: list[bytes] = []  # the unfinished last line, in pieces
    for chunk in chunks:
        if b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                parts.append(chunk)
            continue
        if parts:
            parts.append(chunk)
            chunk = b"".join(parts)
            parts = []
        if b"\r" in chunk:
            held = chunk.endswith(b"\r")
            lines = _LINE_BREAK.split(chunk[:-1] if held else chunk)
            rest = lines.pop() + (b"\r" if held else b"")
        else:
            lines = chunk.split(b"\n")
            rest = lines.pop()
        if rest:
            parts.append(rest)
        yield lines
    if parts:
        lines = _LINE_BREAK.split(b"".join(parts))
        lines.pop()
        yield lines


class _Event:
    """The fields of the event being read."""

    __slots__ = ("data", "error", "error_event", "errors")

    def __init__(self, errors: bool) -> None:
        self.errors = errors  # read error fields and event types
        self.data: list[bytes] = []  # cleared, never replaced
        self.error: list[bytes] = []
        self.error_event = False

    def field(self, line: bytes) -> None:
        """Take a non-blank line other than ``data:...`` (a comment, another field)."""
        if line == b"data":
            self.data.append(b"")
        elif not self.errors:
            return
        elif line.startswith(b"error:"):
            self.error.append(line[7:] if line[6:7] == b" " else line[6:])
        elif line.startswith(b"event:"):
            self.error_event = line[6:].strip() == b"error"

    def end(self) -> bytes | None:
        """Take the blank line that ends the event: return its payload, if any, and reset."""
        error_event = self.error_event
        self.error_event = False
        if self.error:
            error = SSEError(b"\n".join(self.error))
            self.error.clear()
            self.data.clear()
            return error
        data = self.data
        if not data:
            return None
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        data.clear()
        if not payload:
            return None
        return SSEError(payload) if error_event else payload
