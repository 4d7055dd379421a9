"""Messages sent to a running run: the inbox its next model call reads (framework-internal).

``RunIterator.send``, ``LocalRuns.send`` and ``AgentQueue.send`` put a user message into the
run's :class:`Steering`; the ChatModelAgent that makes the run's next model call takes every
message waiting, adds them to its conversation (after the last tool result, never between a
tool call and its result) and emits each as an event. The queue lives in the run's session
values under :data:`STEERING_KEY`, so that it is saved wherever the session is: in the
checkpoint of a run that stops, and, for a durable run (``durability="step"``), written to the
store before ``send`` returns (``attach`` gives the writer). Taking the messages empties the
value; the agent's next step writes the emptied queue and the messages in its conversation
together, so a crash in between delivers them again rather than losing them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agentkit.errors import AgentKitRuntimeError, AgentKitTypeError, AgentKitValueError
from agentkit.schema import Message, Role, user_message

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_QUEUED",
    "STEERING_KEY",
    "Steering",
    "SteeringSource",
    "TAKEN_KEY",
    "steering_message",
]

_log = logging.getLogger("agentkit")

STEERING_KEY = "agentkit.steering"
"""The session value holding the messages sent to the run and not used yet (a tuple)."""

TAKEN_KEY = "agentkit.steering.taken"
"""The session value holding the ids of the last messages taken from a :class:`SteeringSource`
(so that one taken before a crash, and still at the source, is not taken twice)."""

MAX_QUEUED = 32
"""How many sent messages may wait for the run's next model call."""

MAX_MESSAGE_CHARS = 100_000
"""The largest message ``send`` accepts: characters of text plus bytes of inline parts."""

_TAKEN_KEPT = 2 * MAX_QUEUED  # ids of taken messages remembered (the source drops them soon)

# How long a send to a durable run waits for its first write (the run's start), at most.
_ATTACH_WAIT = 60.0


class SteeringSource(Protocol):
    """Messages sent to the run from elsewhere (another process: ``AgentQueue.send``)."""

    def fetch(self) -> list[tuple[str, Message]]:
        """The messages waiting, oldest first, each with an id unique to it."""
        ...

    def acknowledge(self, ids: Sequence[str]) -> None:
        """The run holds these (its checkpoint, for a durable run): drop them."""
        ...


class _SessionLike(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


def steering_message(message: str | Message) -> Message:
    """The user message ``send`` queues for ``message``, checked.

    Raises:
        AgentKitTypeError: ``message`` is neither a ``str`` nor a user :class:`Message`.
        AgentKitValueError: it is empty or larger than :data:`MAX_MESSAGE_CHARS`.
    """
    if isinstance(message, str):
        message = user_message(message)
    elif not isinstance(message, Message):
        raise AgentKitTypeError(
            f"send() takes a str or a user Message (got a {type(message).__name__})"
        )
    if message.role is not Role.USER:
        raise AgentKitValueError(
            f"send() adds a user message to the run (got a {message.role.value} message); "
            "pass user_message(...) or a str"
        )
    inline = (getattr(part, "data", None) for part in message.parts)
    size = len(message.content) + sum(len(data) for data in inline if isinstance(data, bytes))
    if size == 0:
        raise AgentKitValueError("send() got an empty message; send the text the run should see")
    if size > MAX_MESSAGE_CHARS:
        raise AgentKitValueError(
            f"send() got a message of {size} characters and bytes; at most "
            f"{MAX_MESSAGE_CHARS} are taken (send a shorter message, or a URL part for a file)"
        )
    return message


class Steering:
    """The messages sent to one run, waiting for its next model call. Thread-safe.

    Until :meth:`bind` gives it the run's session (a resumed run's session may hold messages
    its earlier part did not use), it keeps what is sent in memory: a run backend's run that
    is queued, not started. A durable run's sends wait for :meth:`attach` (its first image is
    written), so that what they return says the message is in the store.
    """

    __slots__ = (
        "_closed", "_commit", "_cond", "_durable", "_early", "_pending", "_session", "_source",
        "_unused",
    )

    def __init__(self, source: SteeringSource | None = None) -> None:
        self._cond = threading.Condition()
        self._source = source
        self._session: _SessionLike | None = None
        self._durable = False
        self._commit: Callable[[], None] | None = None
        self._closed = False
        self._unused: tuple[Message, ...] = ()
        self._early: tuple[Message, ...] = ()  # sent before the run started
        # Something may wait in the session: a run nobody sends to (the most) takes nothing
        # without taking the lock. Read unlocked by take(): a send racing it is taken at the
        # next model call, as one that comes just after it.
        self._pending = source is not None

    def bind(self, session: _SessionLike, *, durable: bool) -> None:
        """The run starts with ``session``; with ``durable``, sends wait for :meth:`attach`."""
        with self._cond:
            self._session = session
            self._durable = durable
            if self._early:
                session.set(STEERING_KEY, (*self._queued(), *self._early))
                self._early = ()
            self._pending = self._pending or bool(self._queued())

    def attach(self, commit: Callable[[], None]) -> None:
        """The durable run's first image is written: ``commit()`` writes the session values
        from now on. Writes what was sent meanwhile and lets those sends return."""
        with self._cond:
            self._commit = commit
            if self._queued():
                commit()
            self._cond.notify_all()

    @property
    def unused(self) -> tuple[Message, ...]:
        """The messages sent and never used, once the run ended (:meth:`close`)."""
        with self._cond:
            return self._unused

    @property
    def closed(self) -> bool:
        """The run ended: a send is refused."""
        with self._cond:
            return self._closed

    def send(self, message: str | Message) -> bool:
        """Queue ``message`` for the run's next model call; ``False`` once the run ended.

        Returns only once the message is as durable as the run: for a durable run, written to
        the checkpoint store (a run not started yet keeps it in memory, and its first write
        holds it).

        Raises:
            AgentKitTypeError, AgentKitValueError: see :func:`steering_message`.
            AgentKitRuntimeError: :data:`MAX_QUEUED` messages wait already.
            CheckpointError: the durable run could not write it (it is not queued).
        """
        checked = steering_message(message)
        with self._cond:
            if self._closed:
                return False
            if self._session is None:
                if len(self._early) >= MAX_QUEUED:
                    raise self._full()
                self._early = (*self._early, checked)
                return True
            if self._durable and self._commit is None and not self._wait_attached():
                return False
            queued = self._queued()
            if len(queued) >= MAX_QUEUED:
                raise self._full()
            session = self._session
            session.set(STEERING_KEY, (*queued, checked))
            self._pending = True
            if self._commit is not None:
                try:
                    self._commit()
                except BaseException:
                    session.set(STEERING_KEY, queued)
                    raise
            return True

    @staticmethod
    def _full() -> AgentKitRuntimeError:
        return AgentKitRuntimeError(
            f"send(): {MAX_QUEUED} messages wait for the run's next model call already; "
            "wait for the run to use them (their events) before sending more"
        )

    def _wait_attached(self) -> bool:
        """Wait (the lock held) for the durable run's first write: ``False`` if it ended."""
        attached = self._cond.wait_for(
            lambda: self._commit is not None or self._closed, timeout=_ATTACH_WAIT
        )
        if not attached:
            raise AgentKitRuntimeError(
                f"send(): the durable run did not start within {_ATTACH_WAIT:.0f} seconds; "
                "the message was not queued"
            )
        return self._commit is not None

    def take(self) -> list[Message]:
        """Every message waiting, oldest first; the queue is emptied (the caller's next
        durable step writes that, with the messages where it put them)."""
        if not self._pending:
            return []
        with self._cond:
            self._pull()
            queued = self._queued()
            if queued and self._session is not None:
                self._session.set(STEERING_KEY, ())
            self._pending = self._source is not None
            return list(queued)

    def _fetch(self) -> tuple[list[tuple[str, Message]], list[tuple[str, Message]]]:
        """What the source holds, and which of it the run has not taken yet (the lock held)."""
        source, session = self._source, self._session
        if source is None or session is None:
            return [], []
        try:
            fetched = source.fetch()
        except Exception as error:  # the source is away: its messages wait there
            _log.warning("agentkit: could not read the messages sent to the run: %s", error)
            return [], []
        taken: tuple[str, ...] = session.get(TAKEN_KEY, ())
        return fetched, [(key, message) for key, message in fetched if key not in taken]

    def _pull(self) -> None:
        """Move what the source holds into the session (the lock held); written (a durable
        run) before the source is told to drop it."""
        source, session = self._source, self._session
        fetched, new = self._fetch()
        if source is None or session is None or not fetched:
            return
        if new:
            taken: tuple[str, ...] = session.get(TAKEN_KEY, ())
            session.set(STEERING_KEY, (*self._queued(), *(message for _, message in new)))
            session.set(TAKEN_KEY, (*taken, *(key for key, _ in new))[-_TAKEN_KEPT:])
            if self._commit is not None:
                self._commit()
        try:
            source.acknowledge([key for key, _ in fetched])
        except Exception as error:  # taken anyway: the ids say so if they come again
            _log.warning("agentkit: could not drop the messages the run took: %s", error)

    def close(self) -> tuple[Message, ...]:
        """The run ended: refuse sends from now on; returns the messages it never used (kept
        in the session values, hence in a checkpoint the run saved)."""
        with self._cond:
            if not self._closed:
                self._closed = True
                _, left = self._fetch()  # left at the source, for a resume
                self._unused = (
                    *self._queued(), *self._early, *(message for _, message in left)
                )
                self._cond.notify_all()
            return self._unused

    def _queued(self) -> tuple[Message, ...]:
        session = self._session
        if session is None:
            return ()
        queued = session.get(STEERING_KEY, ())
        return tuple(queued) if isinstance(queued, tuple) else ()
