"""The stdio transport: an MCP server as a subprocess, one JSON-RPC message per line.

agentkit reads the server's stdout itself rather than with the ``mcp`` package's stdio
client, to hold every line to the client's ``max_message_bytes`` (the line is never buffered
past the limit, and reading is linear in its length) and to tell the connection at once when
a line is not a message: not UTF-8, not JSON, not JSON-RPC. Either way the transport stops
reading, the connection fails its calls with :class:`~agentkit.mcp.MCPProtocolError`, and the
server is killed; the next call starts a new one.

Shutdown follows the MCP spec for a server that had a session: close its stdin, give it
:data:`EXIT_GRACE` seconds to exit, then ``SIGTERM`` and, :data:`TERM_GRACE` seconds later,
``SIGKILL`` (each to the server's whole process group, so helpers it started go too). A
server that never finished the handshake (the attempt was cancelled or timed out) or that
broke the protocol is owed nothing and gets ``SIGKILL`` at once, so giving up on a connection
takes milliseconds, not seconds.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TextIO

from agentkit.mcp import _compat
from agentkit.mcp._wire import Wire, too_large

__all__ = ["EXIT_GRACE", "TERM_GRACE", "LineSplitter", "LineTooLongError", "open_stdio"]

_log = logging.getLogger("agentkit.mcp")

EXIT_GRACE = 2.0
"""Seconds a server that had a session gets to exit after its stdin closes."""

TERM_GRACE = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` for a server that had a session."""

_FLUSH_TIMEOUT = 0.5  # seconds to hand what is written to a closing stdin
_REAP_TIMEOUT = 5.0  # seconds for the event loop to see a killed process exit
_EXIT_POLL = 0.01  # see _exited_within
_STDOUT_HINT = "a stdio MCP server must write only MCP messages to its stdout (logs go to stderr)"


class LineTooLongError(Exception):
    """A line (or the part of it read so far) is longer than the limit."""


class LineSplitter:
    """Splits a byte stream into lines of at most ``limit`` bytes, in time linear in its length.

    Only the unfinished last line is kept between chunks, and never more than ``limit``
    bytes of it: a longer line raises :class:`LineTooLongError` as soon as it is seen.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their line ends, ``\\r\\n`` or ``\\n``).

        Raises:
            LineTooLongError: a line is longer than ``limit``.
        """
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._pending:
                self._pending += chunk[start:end]
                line = bytes(self._pending)
                self._pending.clear()
            else:
                line = chunk[start:end]
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > self.limit:
                raise LineTooLongError
            lines.append(line)
            start = end + 1
        if len(self._pending) + len(chunk) - start > self.limit + 1:  # + 1: a "\r" may end it
            raise LineTooLongError
        self._pending += memoryview(chunk)[start:]
        return lines


@contextlib.asynccontextmanager
async def open_stdio(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    wire: Wire,
) -> AsyncIterator[_compat.Streams]:
    """Start the server process and yield the (read, write) message streams of its stdout/stdin."""
    import anyio  # the mcp package's own dependency: loaded with the transport, not before

    process = await anyio.open_process(
        [command, *args],
        env=_compat.server_environment(env),
        stderr=_server_stderr(),
        cwd=cwd,
        start_new_session=True,  # its own process group, so a kill reaches its children too
    )
    # No await until the task group is entered: a cancel in between would leak the process.
    inbox_writer, inbox = anyio.create_memory_object_stream[Any](0)
    outbox, outbox_reader = anyio.create_memory_object_stream[Any](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read_messages, process.stdout, inbox_writer, wire)
        tasks.start_soon(_write_messages, process.stdin, outbox_reader, inbox_writer)
        try:
            yield inbox, outbox
        finally:
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await _stop(process, graceful=wire.graceful)
                for stream in (inbox, outbox, inbox_writer, outbox_reader):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _read_messages(stdout: Any, sink: Any, wire: Wire) -> None:
    """Hand each line of the server's stdout to the session as a message, until it breaks."""
    import anyio

    lines = LineSplitter(wire.max_message_bytes)
    async with sink:
        while True:
            try:
                chunk = await stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server closed its stdout (it exited): the session sees the end
            try:
                complete = lines.feed(chunk)
            except LineTooLongError:
                wire.protocol_error(too_large(wire.max_message_bytes))
                return
            for line in complete:
                if not line.strip():
                    continue
                try:
                    message = _compat.parse_message(line)
                except ValueError as error:
                    wire.protocol_error(f"it sent {error}; {_STDOUT_HINT}")
                    return
                try:
                    await sink.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session is gone


async def _write_messages(stdin: Any, source: Any, sink: Any) -> None:
    """Write each message of the session to the server's stdin, one line each."""
    import anyio

    try:
        async with source:
            async for message in source:
                await stdin.send(_compat.dump_message(message) + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server no longer reads: end the session's input too, so that no request
        # waits for an answer that cannot come.
        await sink.aclose()


async def _stop(process: Any, *, graceful: bool) -> None:
    """Stop the server: politely (the MCP spec's sequence) if it had a session, else at once."""
    import anyio

    exited = False
    if graceful:
        await _close_stdin(process)
        exited = await _exited_within(process, EXIT_GRACE)
        if not exited:
            _signal_group(process, signal.SIGTERM)
            exited = await _exited_within(process, TERM_GRACE)
    if not exited:
        _signal_group(process, getattr(signal, "SIGKILL", signal.SIGTERM))
        if not await _exited_within(process, _REAP_TIMEOUT):
            _log.warning("the MCP server process %s did not exit after SIGKILL", process.pid)
    with anyio.move_on_after(_REAP_TIMEOUT):
        # Closes the pipes too: a reader that stopped at a bad line left stdout open.
        await process.aclose()


async def _close_stdin(process: Any) -> None:
    import anyio

    with anyio.move_on_after(_FLUSH_TIMEOUT), contextlib.suppress(Exception):
        await process.stdin.aclose()  # may wait to flush to a server that does not read


async def _exited_within(process: Any, seconds: float) -> bool:
    # Polls the exit status: ``process.wait()`` also waits until the pipes close, which a
    # child of the server that inherited them can put off indefinitely.
    import anyio

    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(_EXIT_POLL)
    return process.returncode is not None


def _signal_group(process: Any, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signum)  # the group leader's pid is the group id
        else:  # pragma: no cover - Windows has no process groups to signal
            process.kill()


def _server_stderr() -> TextIO:
    """Where a server process writes its errors: our stderr, if it is a real file.

    In Jupyter ``sys.stderr`` is the kernel's stream object, which has no file descriptor for
    a child process; the kernel process's own stderr (``sys.__stderr__``) has one.
    """
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    return _devnull()


@functools.lru_cache(maxsize=1)
def _devnull() -> TextIO:
    return open(os.devnull, "w")  # kept open: shared by every server of the process
