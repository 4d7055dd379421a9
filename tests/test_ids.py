"""Ids that must be unique (``agentkit._ids.new_id``): across threads, and across a fork."""

from __future__ import annotations

import os
import re
import threading

import pytest

from agentkit._ids import new_id


def test_ids_are_32_hex_digits_like_a_uuid4_hex() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", new_id())


def test_ids_taken_by_many_threads_at_once_never_repeat() -> None:
    start = threading.Barrier(8)
    taken: list[list[str]] = [[] for _ in range(8)]

    def take(into: list[str]) -> None:
        start.wait(timeout=30)
        into.extend(new_id() for _ in range(5000))

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = [value for into in taken for value in into]
    assert len(every) == 40000
    assert len(set(every)) == len(every)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_next_ids() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read_end)
        os.write(write_end, " ".join(new_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write_end)
    parents = {new_id() for _ in range(100)}
    with os.fdopen(read_end, "rb") as pipe:
        childs = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    assert len(childs) == 100
    assert not parents & childs
