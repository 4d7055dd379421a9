"""A conformance suite for conversation stores, for the stores you write yourself.

Each check takes a zero-argument factory returning a store, runs one behaviour of the
:class:`~agentkit.conversation.ConversationStore` contract, and raises
:class:`~agentkit.testing.StoreConformanceError` (an :class:`AssertionError`) saying what the
store did wrong (explicit raises: they run under ``python -O`` too). Checks use
fresh random ids and delete what they wrote. Run them all with
:func:`check_conversation_store`, or one pytest test per check::

    @pytest.mark.parametrize("check", CONVERSATION_CHECKS, ids=lambda c: c.__name__)
    def test_my_store(check):
        check(lambda: MyStore(...))
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentkit.conversation.base import ConversationStore
from agentkit.errors import ConversationBusyError
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    TokenUsage,
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)
from agentkit.testing import StoreConformanceError

__all__ = [
    "CONVERSATION_CHECKS",
    "ConversationStoreFactory",
    "check_append_is_append_only",
    "check_conversation_store",
    "check_conversations_are_distinct",
    "check_delete",
    "check_lock_is_exclusive_and_released",
    "check_locks_are_per_conversation",
    "check_lock_race_has_one_winner",
    "check_round_trip",
    "check_unknown_id_is_empty",
    "check_unusual_ids",
]

ConversationStoreFactory = Callable[[], ConversationStore]
"""A zero-argument callable returning the store under test."""


def _fail(message: str) -> StoreConformanceError:
    return StoreConformanceError(f"conversation store conformance: {message}")


def _unique(label: str) -> str:
    return f"conformance-{label}-{uuid.uuid4().hex}"


@contextmanager
def _cleanup(store: ConversationStore, *ids: str) -> Iterator[None]:
    try:
        yield
    finally:
        for conversation_id in ids:
            store.delete(conversation_id)


def _sample() -> list[Message]:
    call = ToolCall("call-1", FunctionCall("get_weather", '{"city": "Zürich"}'))
    return [
        user_message("What's the weather in Zürich? ✓"),
        assistant_message("", [call]),
        tool_message('{"sky": "clear"}', "call-1", "get_weather"),
        Message(
            "assistant",
            "Clear skies.\nLine two.",
            response_meta=ResponseMeta("stop", TokenUsage(10, 3, 13)),
        ),
    ]


def _expect(
    store: ConversationStore, conversation_id: str, expected: list[Message], what: str
) -> None:
    got = store.load(conversation_id)
    if got != expected:
        raise _fail(f"{what}: load({conversation_id!r}) returned {got!r}, expected {expected!r}")


def check_round_trip(make_store: ConversationStoreFactory) -> None:
    """Appended messages load back equal, in order, with tool calls and metadata."""
    store = make_store()
    conversation_id = _unique("round-trip")
    with _cleanup(store, conversation_id):
        store.append(conversation_id, _sample())
        _expect(store, conversation_id, _sample(), "after one append")


def check_append_is_append_only(make_store: ConversationStoreFactory) -> None:
    """A second append adds after the first; an empty append changes nothing."""
    store = make_store()
    conversation_id = _unique("append")
    first, second = _sample()[:2], _sample()[2:]
    with _cleanup(store, conversation_id):
        store.append(conversation_id, first)
        store.append(conversation_id, [])
        store.append(conversation_id, second)
        _expect(store, conversation_id, first + second, "after two appends")


def check_unknown_id_is_empty(make_store: ConversationStoreFactory) -> None:
    """An id nobody wrote loads as ``[]``; deleting it is not an error."""
    store = make_store()
    conversation_id = _unique("unknown")
    _expect(store, conversation_id, [], "an unknown id")
    store.delete(conversation_id)


def check_delete(make_store: ConversationStoreFactory) -> None:
    """A deleted conversation loads as ``[]`` and starts afresh when appended to again."""
    store = make_store()
    conversation_id = _unique("delete")
    with _cleanup(store, conversation_id):
        store.append(conversation_id, _sample())
        store.delete(conversation_id)
        _expect(store, conversation_id, [], "after delete")
        store.append(conversation_id, _sample()[:1])
        _expect(store, conversation_id, _sample()[:1], "an append after delete")


def check_conversations_are_distinct(make_store: ConversationStoreFactory) -> None:
    """Two conversations never see each other's messages (ids that differ by case too)."""
    store = make_store()
    base = _unique("distinct")
    lower, upper = base + "-a", base + "-A"
    with _cleanup(store, lower, upper):
        store.append(lower, _sample()[:1])
        store.append(upper, _sample()[1:2])
        _expect(store, lower, _sample()[:1], "the first of two ids")
        _expect(store, upper, _sample()[1:2], "the second of two ids")


def check_unusual_ids(make_store: ConversationStoreFactory) -> None:
    """Ids with slashes, dots, quotes, spaces and non-ASCII text work and stay apart."""
    store = make_store()
    suffix = uuid.uuid4().hex
    ids = [
        f"{prefix}{suffix}"
        for prefix in ("a/b", "../../etc/", "with space ", "'quoted'", "ünï ✓ 中文 🙂", ".", "x\\y")
    ]
    with _cleanup(store, *ids):
        for index, conversation_id in enumerate(ids):
            store.append(conversation_id, [user_message(str(index))])
        for index, conversation_id in enumerate(ids):
            _expect(store, conversation_id, [user_message(str(index))], "an unusual id")


def check_lock_is_exclusive_and_released(make_store: ConversationStoreFactory) -> None:
    """A held lock refuses a second taker with ConversationBusyError; release frees it."""
    store = make_store()
    conversation_id = _unique("lock")
    lock = store.lock(conversation_id)
    try:
        try:
            second = store.lock(conversation_id)
        except ConversationBusyError:
            pass
        else:
            second.release()
            raise _fail(
                "lock() of a conversation already locked did not raise ConversationBusyError"
            )
    finally:
        lock.release()
    lock.release()  # idempotent
    again = store.lock(conversation_id)
    again.release()


def check_locks_are_per_conversation(make_store: ConversationStoreFactory) -> None:
    """Locking one conversation does not lock another."""
    store = make_store()
    first = store.lock(_unique("lock-a"))
    try:
        try:
            second = store.lock(_unique("lock-b"))
        except ConversationBusyError as error:
            raise _fail(f"locking one conversation locked another: {error}") from error
        second.release()
    finally:
        first.release()


def check_lock_race_has_one_winner(make_store: ConversationStoreFactory) -> None:
    """Threads racing for one conversation's lock: exactly one gets it."""
    store = make_store()
    conversation_id = _unique("race")
    racers = 8
    barrier = threading.Barrier(racers, timeout=30)
    winners: list[object] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def race() -> None:
        try:
            barrier.wait()
            lock = store.lock(conversation_id)
        except ConversationBusyError:
            return
        except BaseException as error:
            with guard:
                errors.append(error)
            return
        with guard:
            winners.append(lock)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for lock in winners:
        lock.release()  # type: ignore[attr-defined]
    if errors:
        raise _fail(f"lock() raised {errors[0]!r} (only ConversationBusyError is expected)")
    if len(winners) != 1:
        raise _fail(f"{len(winners)} of {racers} racing threads got the same conversation's lock")


CONVERSATION_CHECKS: tuple[Callable[[ConversationStoreFactory], None], ...] = (
    check_round_trip,
    check_append_is_append_only,
    check_unknown_id_is_empty,
    check_delete,
    check_conversations_are_distinct,
    check_unusual_ids,
    check_lock_is_exclusive_and_released,
    check_locks_are_per_conversation,
    check_lock_race_has_one_winner,
)
"""Every check, in a sensible order."""


def check_conversation_store(make_store: ConversationStoreFactory) -> None:
    """Run every check of :data:`CONVERSATION_CHECKS`; the first failure raises."""
    for check in CONVERSATION_CHECKS:
        check(make_store)
