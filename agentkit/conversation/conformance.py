"""A conformance suite for conversation stores, for the stores you write yourself.

Each check takes a zero-argument factory returning a store, runs one behaviour of the
:class:`~agentkit.conversation.ConversationStore` contract (``drop_record`` and the id rules
included), and raises
:class:`~agentkit.testing.StoreConformanceError` (an :class:`AssertionError`) saying what the
store did wrong (explicit raises: they run under ``python -O`` too). Checks use
fresh random ids and delete what they wrote. Run them all with
:func:`check_conversation_store`, or one pytest test per check::

    @pytest.mark.parametrize("check", CONVERSATION_CHECKS, ids=lambda c: c.__name__)
    def test_my_store(check):
        check(lambda: MyStore(...))

How a store reports a bad record can only be checked by planting one, which takes knowledge of
the store's format: :func:`check_bad_records_are_reported` takes a ``write_raw(store,
conversation_id, record_bytes)`` function that appends one raw record, and
:func:`check_conversation_store` runs it when given ``write_raw``. A store that keeps records
as the built-in ones do (UTF-8 JSON of ``Message.to_dict``) passes it by reading them
through the same rules: bad UTF-8, bad JSON and anything but a message object raise
:class:`~agentkit.errors.ConversationRecordError` with ``conversation_id`` and ``index`` set.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from agentkit.conversation._base import MAX_CONVERSATION_ID_BYTES, ConversationStore
from agentkit.conversation._events import load_events, rollback
from agentkit.errors import ConversationBusyError, ConversationRecordError
from agentkit.schema import (
    MESSAGE_ID_KEY,
    AudioPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    ResponseMeta,
    TokenUsage,
    ToolCall,
    assistant_message,
    message_id,
    tool_message,
    user_message,
)
from agentkit.testing import StoreConformanceError

__all__ = [
    "CONVERSATION_CHECKS",
    "ConversationStoreFactory",
    "RawRecordWriter",
    "check_any_text_round_trips",
    "check_append_is_append_only",
    "check_bad_records_are_reported",
    "check_content_parts_round_trip",
    "check_conversation_store",
    "check_conversations_are_distinct",
    "check_delete",
    "check_drop_record",
    "check_earlier_conversations_roll_back_by_user_messages",
    "check_events_and_rollback",
    "check_ids_no_store_can_keep_are_refused",
    "check_lock_is_exclusive_and_released",
    "check_locks_are_per_conversation",
    "check_lock_race_has_one_winner",
    "check_record_size_limit",
    "check_round_trip",
    "check_unknown_id_is_empty",
    "check_unusual_ids",
]

ConversationStoreFactory = Callable[[], ConversationStore]
"""A zero-argument callable returning the store under test."""

RawRecordWriter = Callable[[Any, str, bytes], None]
"""``write_raw(store, conversation_id, record)``: append one record's bytes as they are."""


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


# Small valid media: a 1x1 PNG, a minimal PDF, a WAV of four silent samples.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082"
)
_PDF = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer\n%%EOF\n"
_WAV = (
    b"RIFF,\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00"
    b"\x80>\x00\x00\x02\x00\x10\x00data\x08\x00\x00\x00" + bytes(8)
)


def _parts_sample() -> list[Message]:
    call = ToolCall("call-7", FunctionCall("screenshot", "{}"))
    question = user_message(
        [
            "Compare ",
            ImagePart(_PNG, detail="high"),
            ImagePart(url="https://example.com/cat.png", detail="low"),
            FilePart(_PDF, filename="contract.pdf"),
            FilePart(url="https://example.com/a.pdf", media_type="application/pdf"),
            AudioPart(_WAV, media_type="audio/wav"),
            " please ✓",
        ]
    )
    return [
        attrs.evolve(question, extra={MESSAGE_ID_KEY: "3f1c2a9e4b7d4e0f8a6b5c4d3e2f1a0b"}),
        assistant_message("", [call]),
        Message(
            "tool",
            tool_call_id="call-7",
            tool_name="screenshot",
            parts=["Here it is:", ImagePart(_PNG)],
        ),
        Message("assistant", parts=["Said:", AudioPart(b"\x00\x01" * 8, media_type="audio/pcm")]),
    ]


def check_content_parts_round_trip(make_store: ConversationStoreFactory) -> None:
    """Messages with every kind of content part (bytes and URLs; text, image, file and
    audio) and a stable message id load back equal."""
    store = make_store()
    conversation_id = _unique("parts")
    with _cleanup(store, conversation_id):
        store.append(conversation_id, _parts_sample())
        _expect(store, conversation_id, _parts_sample(), "after an append of content parts")
        loaded = store.load(conversation_id)
        if message_id(loaded[0]) != "3f1c2a9e4b7d4e0f8a6b5c4d3e2f1a0b":
            raise _fail(f"the message id was not kept: {loaded[0].extra!r}")


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
    """Ids with slashes, colons, dots, quotes, spaces and non-ASCII text work and stay apart."""
    store = make_store()
    suffix = uuid.uuid4().hex
    prefixes = ("a/b", "../../etc/", "with space ", "'quoted'", "ünï ✓ 中文 🙂", ".", "x\\y")
    ids = [f"{prefix}{suffix}" for prefix in (*prefixes, "tenant:1:", ":", "line\nbreak")]
    ids.append(("x" * MAX_CONVERSATION_ID_BYTES)[: -len(suffix)] + suffix)
    with _cleanup(store, *ids):
        for index, conversation_id in enumerate(ids):
            store.append(conversation_id, [user_message(str(index))])
        for index, conversation_id in enumerate(ids):
            _expect(store, conversation_id, [user_message(str(index))], "an unusual id")


def check_ids_no_store_can_keep_are_refused(make_store: ConversationStoreFactory) -> None:
    """Ids with a lone surrogate or NUL, over the length bound or empty raise ``ValueError``
    in every method, before anything is stored."""
    store = make_store()
    suffix = uuid.uuid4().hex
    bad_ids = [
        f"lone \ud800 {suffix}",
        f"nul \x00 {suffix}",
        "x" * (MAX_CONVERSATION_ID_BYTES + 1),
        "",
    ]
    for bad_id in bad_ids:
        _expect_value_error(store, bad_id)


def _expect_value_error(store: ConversationStore, bad_id: str) -> None:
    operations: dict[str, Callable[[], object]] = {
        "load": lambda: store.load(bad_id),
        "append": lambda: store.append(bad_id, [user_message("x")]),
        "delete": lambda: store.delete(bad_id),
        "lock": lambda: store.lock(bad_id),
        "drop_record": lambda: store.drop_record(bad_id, 0),
    }
    for name, operation in operations.items():
        try:
            operation()
        except ValueError:
            continue
        except Exception as error:
            raise _fail(
                f"{name}({bad_id[:30]!r}...) raised {type(error).__name__}: {error} "
                "instead of ValueError"
            ) from error
        raise _fail(f"{name}({bad_id[:30]!r}...) accepted an id no store can keep")


def check_any_text_round_trips(make_store: ConversationStoreFactory) -> None:
    """Messages holding a lone surrogate, NUL, CR, U+2028 or emoji load back equal."""
    store = make_store()
    conversation_id = _unique("text")
    odd = [
        user_message("half an emoji: \ud83d, NUL \x00, CR \r, LS \u2028"),
        assistant_message("\udfff and 🙂 and \u0085"),
    ]
    with _cleanup(store, conversation_id):
        store.append(conversation_id, odd)
        _expect(store, conversation_id, odd, "messages with unusual text")


def check_drop_record(make_store: ConversationStoreFactory) -> None:
    """``drop_record`` removes one record by position; out of range is an ``IndexError``; a
    locked conversation is a ``ConversationBusyError``."""
    store = make_store()
    conversation_id = _unique("drop")
    sample = _sample()
    with _cleanup(store, conversation_id):
        store.append(conversation_id, sample)
        store.drop_record(conversation_id, 1)
        _expect(store, conversation_id, [sample[0], *sample[2:]], "after drop_record(id, 1)")
        store.drop_record(conversation_id, 0)
        _expect(store, conversation_id, sample[2:], "after drop_record(id, 0)")
        for index in (2, -1):
            try:
                store.drop_record(conversation_id, index)
            except IndexError:
                continue
            raise _fail(f"drop_record(id, {index}) of 2 records did not raise IndexError")
        _expect(store, conversation_id, sample[2:], "after refused drops")
        lock = store.lock(conversation_id)
        try:
            try:
                store.drop_record(conversation_id, 0)
            except ConversationBusyError:
                pass
            else:
                raise _fail("drop_record changed a conversation whose lock was held")
        finally:
            lock.release()
        _expect(store, conversation_id, sample[2:], "after a drop refused as busy")


def check_record_size_limit(make_store: ConversationStoreFactory) -> None:
    """A store with a ``max_record_bytes`` refuses an append with a message over it with
    ``ConversationRecordError`` (``index`` = the message's position) and appends nothing.
    Stores without a ``max_record_bytes`` attribute pass."""
    store = make_store()
    limit = getattr(store, "max_record_bytes", None)
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise _fail(f"max_record_bytes is {limit!r}, not a positive int")
    conversation_id = _unique("size")
    with _cleanup(store, conversation_id):
        store.append(conversation_id, [user_message("before")])
        try:
            store.append(conversation_id, [user_message("small"), user_message("x" * limit)])
        except ConversationRecordError as error:
            if (error.conversation_id, error.index) != (conversation_id, 1):
                raise _fail(
                    "the ConversationRecordError of an oversized message names "
                    f"{error.conversation_id!r}, index {error.index}; expected "
                    f"{conversation_id!r}, index 1"
                ) from error
        else:
            raise _fail(f"append of a message over max_record_bytes={limit} was accepted")
        _expect(store, conversation_id, [user_message("before")], "after a refused append")


_BAD_RECORDS = (
    b'{"role": "user", "content": "unfinished',
    b'["user", "a list"]',
    b'{"role": "wizard", "content": "x"}',
    b'{"role": "user", "content": 5}',
    b'{"role": "user", "content": "\xed\xa0\x80"}',
    b"",
)


def check_bad_records_are_reported(
    make_store: ConversationStoreFactory, write_raw: RawRecordWriter
) -> None:
    """A bad record (not UTF-8, not JSON, not a message, empty) makes ``load`` raise
    :class:`~agentkit.errors.ConversationRecordError` naming the conversation and the record's
    position, and ``drop_record`` of that position repairs the conversation."""
    store = make_store()
    for raw in _BAD_RECORDS:
        conversation_id = _unique("bad-record")
        with _cleanup(store, conversation_id):
            store.append(conversation_id, [user_message("before")])
            write_raw(store, conversation_id, raw)
            store.append(conversation_id, [user_message("after")])
            try:
                got = store.load(conversation_id)
            except ConversationRecordError as error:
                if (error.conversation_id, error.index) != (conversation_id, 1):
                    raise _fail(
                        f"the error for bad record {raw!r} names {error.conversation_id!r}, "
                        f"index {error.index}; expected {conversation_id!r}, index 1"
                    ) from error
            except Exception as error:
                raise _fail(
                    f"load of a conversation with bad record {raw!r} raised "
                    f"{type(error).__name__}: {error}, not ConversationRecordError"
                ) from error
            else:
                raise _fail(
                    f"load of a conversation with bad record {raw!r} did not raise "
                    f"ConversationRecordError (it returned {len(got)} messages)"
                )
            store.drop_record(conversation_id, 1)
            expected = [user_message("before"), user_message("after")]
            _expect(store, conversation_id, expected, "after dropping the bad record")


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


def check_events_and_rollback(make_store: ConversationStoreFactory) -> None:
    """Turns a Runner completed load as events (who said each message) and roll back: the
    next turn's model sees the kept turns only, the rolled-back ones are no events, and a
    rollback waits for no running turn (the conversation's lock)."""
    from agentkit import ChatModelAgent, Runner, with_conversation_id
    from agentkit.models import ScriptedChatModel

    store = make_store()
    conversation_id = _unique("events")
    model = ScriptedChatModel(["one", "two", "three"])
    runner = Runner(ChatModelAgent("Helper", "helps", model), conversation_store=store)
    with _cleanup(store, conversation_id):
        for text in ("first", "second"):
            runner.invoke(text, with_conversation_id(conversation_id))
        events = [(e.turn, e.message.content, e.agent_name, e.run_path)
                  for e in load_events(store, conversation_id)]
        expected = [(0, "first", "", ()), (0, "one", "Helper", ("Helper",)),
                    (1, "second", "", ()), (1, "two", "Helper", ("Helper",))]
        if events != expected:
            raise _fail(f"load_events returned {events!r}, expected {expected!r}")
        lock = store.lock(conversation_id)
        try:
            rollback(store, conversation_id, keep_turns=1)
        except ConversationBusyError:
            pass
        else:
            raise _fail("rollback() went ahead while the conversation's lock was held")
        finally:
            lock.release()
        rollback(store, conversation_id, keep_turns=1)
        kept = [e.message.content for e in load_events(store, conversation_id)]
        if kept != ["first", "one"]:
            raise _fail(f"after rollback(keep_turns=1) the events are {kept!r}")
        runner.invoke("third", with_conversation_id(conversation_id))
        seen = [m.content for m in model.calls[-1].messages]
        if seen != ["first", "one", "third"]:
            raise _fail(f"the turn after a rollback sent the model {seen!r}")
        turns = [(e.turn, e.message.content) for e in load_events(store, conversation_id)]
        if turns != [(0, "first"), (0, "one"), (1, "third"), (1, "three")]:
            raise _fail(f"after a rollback and a turn the events are {turns!r}")


def check_earlier_conversations_roll_back_by_user_messages(
    make_store: ConversationStoreFactory,
) -> None:
    """A conversation of plain messages (as earlier releases wrote them, with no turn
    records) loads as events whose turns start at user messages, and rolls back by them."""
    store = make_store()
    conversation_id = _unique("earlier")
    with _cleanup(store, conversation_id):
        store.append(conversation_id, _sample())
        store.append(conversation_id, [user_message("And tomorrow?"), assistant_message("Rain.")])
        turns = [e.turn for e in load_events(store, conversation_id)]
        if turns != [0, 0, 0, 0, 1, 1]:
            raise _fail(f"the turns of an earlier conversation's events are {turns!r}")
        rollback(store, conversation_id, keep_turns=1)
        kept = [e.message for e in load_events(store, conversation_id)]
        if kept != _sample():
            raise _fail(f"after rollback(keep_turns=1) the events hold {kept!r}")
        try:
            rollback(store, conversation_id, keep_turns=2)
        except ValueError:
            pass
        else:
            raise _fail("rollback() to more turns than the conversation has did not raise")


CONVERSATION_CHECKS: tuple[Callable[[ConversationStoreFactory], None], ...] = (
    check_round_trip,
    check_content_parts_round_trip,
    check_append_is_append_only,
    check_unknown_id_is_empty,
    check_delete,
    check_conversations_are_distinct,
    check_unusual_ids,
    check_ids_no_store_can_keep_are_refused,
    check_any_text_round_trips,
    check_drop_record,
    check_record_size_limit,
    check_lock_is_exclusive_and_released,
    check_locks_are_per_conversation,
    check_lock_race_has_one_winner,
    check_events_and_rollback,
    check_earlier_conversations_roll_back_by_user_messages,
)
"""Every check, in a sensible order."""


def check_conversation_store(
    make_store: ConversationStoreFactory, *, write_raw: RawRecordWriter | None = None
) -> None:
    """Run every check of :data:`CONVERSATION_CHECKS`; the first failure raises.

    With ``write_raw`` (see :func:`check_bad_records_are_reported`), bad records are checked
    too.
    """
    for check in CONVERSATION_CHECKS:
        check(make_store)
    if write_raw is not None:
        check_bad_records_are_reported(make_store, write_raw)
