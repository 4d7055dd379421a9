"""One model call's state, and the reading of a Server-Sent Events reply into message chunks.

:class:`EventStream` does what every streamed wire shares: it reads the body within the call's
deadline and size limit, restarts the clock on data (not on keep-alive comments), drains the
response after the end so the connection can be reused, reports a cut or stalled stream, and
holds the turn the call took under the model's limits. What one event means is the wire's:
a subclass implements :meth:`EventStream.read_payloads`.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import time
from collections.abc import Iterator

import httpx

from agentkit._cancel import CancelMode
from agentkit._runctx import RunFrame
from agentkit.errors import AgentCancelledError, APITimeoutError, IncompleteStreamError, ModelError
from agentkit.models._http._body import body_chunks
from agentkit.models._http._limits import Admission
from agentkit.models._http._sse import sse_batches
from agentkit.models._http._transport import _Guard
from agentkit.schema import Message

__all__: list[str] = []


class Call:
    """The state of one model call across its attempts."""

    __slots__ = ("attempts", "body", "frame", "guard", "retry_after", "target")

    def __init__(self, body: bytes, timeout: float, frame: RunFrame | None) -> None:
        self.body = body
        self.target: Target = _NO_TARGET  # where the requests go (set by the model)
        self.attempts = 0
        self.retry_after: float | None = None
        self.guard = _Guard(time.monotonic() + timeout)
        self.frame = frame  # the run the call was made in, if any

    def cancelled(self) -> AgentCancelledError:
        """Return the error that ends a call aborted by a cancel (or a closed stream)."""
        frame = self.frame
        if frame is not None and frame.scope.stopping:
            try:
                frame.scope.check()  # marks the cancel as taken effect, with its mode
            except AgentCancelledError as error:
                return error
        return AgentCancelledError(CancelMode.IMMEDIATE)


class Target:
    """Where one call's requests go: the URL as text (for messages) and as sent."""

    __slots__ = ("request_url", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        # Parsed once: httpx parses a URL given as text on every request (~12 us). A URL it
        # cannot parse stays text, so that the request reports it, as it always has.
        self.request_url: httpx.URL | str = url
        with contextlib.suppress(httpx.InvalidURL):
            self.request_url = httpx.URL(url)


class EventStream(abc.ABC):
    """A streamed response whose first chunks have been read.

    The chunks come in lists: those that one network read completed, so that a reader's
    copies buffer them in one round (see :func:`agentkit.streams.stream_from_batches`).
    A subclass reads the events of its wire (:meth:`read_payloads`), sets ``done`` at the
    wire's end marker (the rest is drained) and ``finished`` once the reply said it is over.
    """

    owner = "OpenAIChatModel"
    """The model class named in error messages."""
    end_marker = "[DONE] or a finish reason"
    """What a complete stream ends with, for the error of one that ends without it."""

    __slots__ = (
        "admission",
        "attached",
        "call",
        "count",
        "done",
        "finished",
        "first",
        "iterator",
        "limit",
        "response",
        "timeout",
        "tokens",
        "url",
    )

    def __init__(
        self,
        response: httpx.Response,
        url: str,
        call: Call,
        timeout: float,
        limit: int | None,
        attach: bool,
    ) -> None:
        self.response = response
        self.url = url
        self.call = call
        self.timeout = timeout
        self.limit = limit  # max_response_bytes, for the whole stream
        self.count = 0
        self.done = False  # the wire's end marker seen: the rest is drained
        self.finished = False  # the reply said it is over (a finish reason)
        self.first: list[Message] | None = None
        self.iterator: Iterator[list[Message]] = iter(())
        self.admission: Admission | None = None  # the turn taken under the model's limits
        self.tokens: int | None = None  # the total tokens the server reported, if it did
        # A client of the caller's does not route its I/O through the guard: register the
        # response's socket, so that an abort can still shut it down.
        self.attached = attach
        if attach:
            call.guard.attach(response.extensions.get("network_stream"))

    @abc.abstractmethod
    def read_payloads(self, payloads: list[bytes], batch: list[Message]) -> None:
        """Append the message chunks of SSE ``payloads`` to ``batch`` (the wire's part)."""

    def read_first(self) -> None:
        """Read up to the first chunk, so that errors before it are raised by ``stream()``."""
        batches = self.batches()
        try:
            self.first = next(batches)
        except StopIteration:
            raise ModelError(
                f"the stream from {self.url} ended without a single message chunk; "
                "the server sent no reply",
                status_code=self.response.status_code,
            ) from None
        self.iterator = batches

    def batches(self) -> Iterator[list[Message]]:
        """Yield the message chunks in lists (never empty), reading the response to its end.

        The response is read to its end even after the end marker, so that the connection
        can be reused. An error in the middle of a list ends the stream after the chunks
        before it.
        """
        guard = self.call.guard
        timeout = self.timeout
        monotonic = time.monotonic
        try:
            body = body_chunks(self.response, guard, self.limit, self.url, self.owner)
            for payloads in sse_batches(body):
                if self.done:
                    continue  # drain, so the connection goes back to the pool
                # Only data restarts the clock: keep-alive comments do not.
                guard.deadline = monotonic() + timeout
                batch: list[Message] = []
                try:
                    self.read_payloads(payloads, batch)
                except BaseException:
                    if batch:
                        yield batch  # the chunks before the error come first
                    raise
                if batch:
                    yield batch
        except httpx.TransportError as error:  # a timeout is a transport error too
            failure = self._failure(error)
            if failure is None:
                return
            raise failure from error
        finally:
            self.detach()
        if guard.aborted:
            raise self.call.cancelled()
        if not self.done and not self.finished:
            raise self.incomplete()

    def incomplete(self) -> ModelError:
        """Return the error of a stream that ended before the reply was over."""
        return IncompleteStreamError(
            f"the stream from {self.url} ended after {self.count} chunks without "
            f"{self.end_marker}; the reply is incomplete"
        )

    def _failure(self, error: httpx.TransportError) -> BaseException | None:
        """Return the error that ends a stream whose read failed (``None``: it was complete)."""
        if self.call.guard.aborted:
            return self.call.cancelled()
        if self.done:
            return None
        if isinstance(error, httpx.TimeoutException):
            return APITimeoutError(
                f"the stream from {self.url} stalled: no data for {self.timeout} s after "
                f"{self.count} chunks ({type(error).__name__}); if the model pauses longer, "
                f"pass a larger {self.owner}(..., timeout=...)"
            )
        return IncompleteStreamError(
            f"the stream from {self.url} broke after {self.count} chunks, before the server "
            f"finished it ({type(error).__name__}: {error})"
        )

    def detach(self) -> None:
        """Unregister the response's socket before the connection goes back to the pool."""
        if self.attached:
            self.attached = False
            self.call.guard.attach(None)

    def close(self) -> None:
        """Release the response (and its connection), and the turn it held under limits."""
        self.detach()
        try:
            self.response.close()
        finally:
            admission, self.admission = self.admission, None
            if admission is not None:
                admission.release(self.tokens)

    def chunks(self) -> Iterator[list[Message]]:
        """Return an iterator of the first chunks, then the rest as they arrive (in lists)."""
        first, self.first = self.first, None
        return self.iterator if first is None else itertools.chain((first,), self.iterator)


_NO_TARGET = Target("")
