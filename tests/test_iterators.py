"""The AsyncIterator/AsyncGenerator pair."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import AsyncGenerator, AsyncIterator, new_async_iterator_pair


def new_pair() -> tuple[AsyncIterator[object], AsyncGenerator[object]]:
    """A connected pair of any items."""
    return new_async_iterator_pair()


@given(st.lists(st.integers(), max_size=100))
@settings(deadline=None, max_examples=50)
def test_order_is_preserved_across_threads(items: list[int]) -> None:
    iterator, generator = new_pair()

    def produce() -> None:
        for item in items:
            assert generator.send(item)
        generator.close()

    thread = threading.Thread(target=produce)
    thread.start()
    assert list(iterator) == items
    thread.join()


def test_next_returns_items_then_end_marker_repeatedly() -> None:
    iterator, generator = new_pair()
    generator.send("a")
    generator.close()
    generator.close()  # idempotent
    assert iterator.next() == ("a", True)
    assert iterator.next() == (None, False)
    assert iterator.next() == (None, False)


def test_items_sent_before_close_are_drained() -> None:
    iterator, generator = new_pair()
    for item in range(5):
        generator.send(item)
    generator.close()
    assert list(iterator) == [0, 1, 2, 3, 4]


def test_send_after_consumer_close_returns_false() -> None:
    iterator, generator = new_pair()
    assert generator.send(1)
    iterator.close()
    assert generator.send(2) is False
    assert generator.closed_by_consumer


def test_send_after_own_close_is_a_bug() -> None:
    _, generator = new_async_iterator_pair()
    generator.close()
    with pytest.raises(RuntimeError):
        generator.send(1)


def test_context_manager_closes_the_iterator() -> None:
    iterator, generator = new_pair()
    with iterator as events:
        generator.send(1)
        assert events.next() == (1, True)
    assert generator.send(2) is False
    assert list(iterator) == []


def test_next_blocks_until_an_item_arrives() -> None:
    iterator, generator = new_pair()
    got: list[object] = []
    done = threading.Event()

    def consume() -> None:
        got.append(iterator.next())
        done.set()

    thread = threading.Thread(target=consume)
    thread.start()
    assert not done.wait(0.1)
    generator.send("x")
    assert done.wait(10)
    assert got == [("x", True)]
    thread.join()
