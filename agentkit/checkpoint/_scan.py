"""The opcode check every checkpoint payload passes before the C unpickler runs it.

The checkpoint pickler (see :mod:`agentkit.checkpoint._codec`) writes a small, fixed subset of
pickle protocol 5: literals, lists, dicts, sets, tuples, frozensets, the memo, and one global,
the restore function, applied with ``REDUCE`` to a tuple of plain data. :func:`check_stream`
walks the opcodes of a payload once, simulating the unpickler's stack with placeholders, and
refuses anything else *before* a single object is built:

* opcodes outside that subset: ``BUILD`` (which would set state on whatever is below it,
  enum members and classes included), ``INST``/``OBJ``/``NEWOBJ*``, ``EXT*``, persistent ids,
  out-of-band buffers, the text opcodes (``INT``/``LONG`` parse decimal strings), ``PUT``
  with an arbitrary memo index (the C unpickler would allocate a memo table that large), ...;
* ``REDUCE`` whose callable is not the restore global, so nothing else is ever called;
* ``APPEND(S)``/``SETITEM(S)``/``ADDITEMS`` on anything but a list, dict or set created by the
  stream and not yet placed into another container (so restored objects, enum members
  included, and shared containers are never mutated, and reference cycles are refused);
* memo references that do not exist, integers longer than :data:`MAX_INT_BYTES` or more than
  :data:`MAX_BIG_INTS` big ones (which could flood a dict with colliding hashes), more than
  ``max_objects`` opcodes (each makes at most one object or memo entry, so this bounds the
  memory and the time of loading; a ``MEMOIZE`` right after the ``REDUCE`` or tuple it
  remembers is counted with it), nesting deeper than ``max_depth``, truncation and trailing
  data.

Depth is exact: a container's depth is final when it is placed into another one, because it
cannot change afterwards.

The simulated stack and memo hold only ints, so that closing a tuple of plain values is one
``max`` over its items: an immutable value is its nesting depth (0 for a scalar, 1 or more
for a tuple, a frozenset or a restored object, never more than ``max_depth``),
:data:`_RESTORE` (far above any depth) is the restore global, and ``_BOX + k`` is the k-th
list, dict or set the stream created (its kind, depth and whether it was placed are kept by
index, so memo aliases share them). A maximum above ``max_depth`` sends the tuple to the slow
path, which tells these apart. The hottest opcodes are handled in the loop of :func:`_check`,
every other one by a function from a table of 256.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from agentkit.errors import AgentKitValueError, CheckpointError

__all__ = ["MAX_INT_BYTES", "check_stream"]

MAX_INT_BYTES = 8192
"""Longest integer a checkpoint may hold, in bytes (65 536 bits)."""
MAX_BIG_INTS = 2048
"""Most integers of 8 bytes or more a checkpoint may hold.

Smaller integers hash to themselves, so distinct ones never collide in a dict or set; bigger
ones can be chosen to share one hash, and n colliding keys cost n² comparisons to insert. With
this cap the worst case stays far below a second."""

_LIST, _DICT, _SET = 1, 2, 3
_KIND_NAMES = {_LIST: "list", _DICT: "dict", _SET: "set"}
_RESTORE = 1 << 62  # placeholder of the restore global: above every depth
_BOX = _RESTORE + 1  # placeholder of the first list, dict or set; the next is _BOX + 1, ...


def check_stream(data: bytes, *, max_depth: int, max_objects: int) -> None:
    """Raise :class:`CheckpointError` unless ``data`` is a payload the checkpoint pickler writes.

    Only the shape is checked; which class names the restore global accepts is decided when it
    is called.
    """
    try:
        _check(data, _Scan(max_depth), max_objects)
    except _Refused as exc:
        raise CheckpointError(str(exc)) from None
    except IndexError:  # read past the end, an empty stack or mark stack, a missing memo entry
        raise CheckpointError("the pickle stream is truncated or malformed") from None


class _Refused(Exception):
    pass


class _Scan:
    """The simulated unpickler: its stack, marks and memo, and the containers it made."""

    __slots__ = ("big_ints", "box_depth", "box_kind", "box_placed", "marks", "max_depth", "memo",
                 "stack")  # fmt: skip

    def __init__(self, max_depth: int) -> None:
        if not 0 < max_depth < _RESTORE:
            raise AgentKitValueError(
                f"max_depth must be a positive int below 2**62, not {max_depth!r}"
            )
        self.max_depth = max_depth
        self.stack: list[int] = []
        self.marks: list[int] = []
        self.memo: list[int] = []
        self.box_kind: list[int] = []
        self.box_depth: list[int] = []
        self.box_placed: list[bool] = []
        self.big_ints = 0

    def new_box(self, kind: int) -> int:
        """Register a new empty list, dict or set; return its placeholder."""
        self.box_kind.append(kind)
        self.box_depth.append(1)
        self.box_placed.append(False)
        return _BOX - 1 + len(self.box_kind)

    def deeper(self, depth: int) -> int:
        """The depth of a value holding one of depth ``depth``; refuse past ``max_depth``."""
        if depth >= self.max_depth:
            raise _Refused(f"values nested deeper than {self.max_depth} levels")
        return depth + 1

    def close(self, items: list[int]) -> int:
        """Place ``items`` into a new container; return the depth that container reaches."""
        deepest = 0
        for item in items:
            if item < _RESTORE:
                depth = item
            elif item == _RESTORE:
                raise _Refused("the restore function itself cannot be stored")
            else:
                self.box_placed[item - _BOX] = True
                depth = self.box_depth[item - _BOX]
            if depth > deepest:  # noqa: PLR1730 (faster than max() in this loop)
                deepest = depth
        return self.deeper(deepest)


def _check(data: bytes, scan: _Scan, max_objects: int) -> None:
    # The hottest opcodes first, inline; the others through _HANDLERS. Every step makes at
    # most one object and one memo entry (a MEMOIZE right after REDUCE or a tuple is taken
    # in the same step), so bounding the steps (for free, by the loop) bounds objects,
    # memory and time alike.
    fixed, handlers = _FIXED_SIZES, _HANDLERS
    stack, marks = scan.stack, scan.marks
    push, pop = stack.append, stack.pop
    memo = scan.memo
    remember = memo.append
    max_depth = scan.max_depth
    i = 0
    for _ in itertools.repeat(None, max_objects):
        op = data[i]
        if op == 0x68:  # BINGET
            push(memo[data[i + 1]])
            i += 2
        elif op == 0x94:  # MEMOIZE
            remember(stack[-1])
            i += 1
        elif fixed[op]:  # a scalar of fixed size
            push(0)
            i += fixed[op]
        elif op == 0x52:  # REDUCE
            args = pop()
            if pop() != _RESTORE or not 0 < args < max_depth:
                raise _Refused(_reduce_refusal(args, max_depth))
            push(args + 1)
            i += 1
            if data[i] == 0x94:
                remember(args + 1)
                i += 1
        elif op == 0x28:  # MARK
            marks.append(len(stack))
            i += 1
        elif op == 0x74 or 0x85 <= op <= 0x87:  # TUPLE, TUPLE1, TUPLE2, TUPLE3
            start = marks.pop() if op == 0x74 else _tuple_start(scan, op - 0x84)
            items = stack[start:]
            del stack[start:]
            depth = max(items) + 1 if items else 1
            if depth > max_depth:  # a container or the restore global among them, or too deep
                depth = scan.close(items)
            push(depth)
            i += 1
            if data[i] == 0x94:
                remember(depth)
                i += 1
        elif op == 0x8C:  # SHORT_BINUNICODE
            i += 2 + data[i + 1]
            push(0)
        elif op == 0x2E:  # STOP
            _stop(scan, data, i)
            return
        else:
            i = handlers[op](scan, data, i)
    raise _Refused(f"more than {max_objects} objects (pickle opcodes)")


def _reduce_refusal(args: int, max_depth: int) -> str:
    if max_depth <= args < _RESTORE:
        return f"values nested deeper than {max_depth} levels"
    return "REDUCE may only apply the restore function to a tuple"


def _tuple_start(scan: _Scan, count: int) -> int:
    """Where TUPLE1/2/3 start on the stack, checked against the bottom and the last mark."""
    start = len(scan.stack) - count
    if start < 0:
        raise _Refused("a tuple opcode reaches below the bottom of the stack")
    if scan.marks and scan.marks[-1] > start:
        raise _Refused("a tuple opcode reaches below its mark")
    return start


def _stop(scan: _Scan, data: bytes, i: int) -> None:
    if len(scan.stack) != 1 or scan.marks or scan.stack[0] == _RESTORE:
        raise _Refused("the stream does not end with exactly one value")
    if i + 1 != len(data):
        raise _Refused("unexpected bytes after the payload")


# -- the other opcodes: each handler takes the opcode at data[i] and returns the next i -----

_Handler = Callable[[_Scan, bytes, int], int]


def _refuse(scan: _Scan, data: bytes, i: int) -> int:
    raise _Refused(f"pickle opcode {data[i : i + 1]!r} is not allowed in checkpoints")


def _empty_container(scan: _Scan, data: bytes, i: int) -> int:
    op = data[i]
    scan.stack.append(scan.new_box(_DICT if op == 0x7D else _LIST if op == 0x5D else _SET))
    return i + 1


def _empty_tuple(scan: _Scan, data: bytes, i: int) -> int:
    scan.stack.append(1)
    return i + 1


def _frozenset(scan: _Scan, data: bytes, i: int) -> int:
    start = scan.marks.pop()
    items = scan.stack[start:]
    del scan.stack[start:]
    scan.stack.append(scan.close(items))
    return i + 1


def _fill(scan: _Scan, data: bytes, i: int) -> int:
    """APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS: only into an unplaced container."""
    op, stack, marks = data[i], scan.stack, scan.marks
    if op == 0x61:  # APPEND
        start, kind = len(stack) - 1, _LIST
    elif op == 0x73:  # SETITEM
        start, kind = len(stack) - 2, _DICT
    else:
        start = marks.pop()
        kind = _LIST if op == 0x65 else _DICT if op == 0x75 else _SET
        if kind == _DICT and (len(stack) - start) % 2:
            raise _Refused("SETITEMS with an odd number of items")
    if start < 1 or (marks and marks[-1] > start - 1):
        raise _Refused("a container opcode reaches below its mark")
    box = stack[start - 1] - _BOX
    if box < 0 or scan.box_kind[box] != kind:
        raise _Refused(f"only a {_KIND_NAMES[kind]} built by the checkpoint can be filled")
    if scan.box_placed[box]:
        raise _Refused("a container is changed after it was placed (a reference cycle?)")
    items = stack[start:]
    del stack[start:]
    depth = scan.close(items)
    if scan.box_placed[box]:  # it was among its own items
        raise _Refused("a container holds itself (a reference cycle)")
    scan.box_depth[box] = max(scan.box_depth[box], depth)
    return i + 1


def _long_binget(scan: _Scan, data: bytes, i: int) -> int:
    scan.stack.append(scan.memo[int.from_bytes(data[i + 1 : i + 5], "little")])
    return i + 5


def _counted(scan: _Scan, data: bytes, i: int) -> int:
    """Bytes, str and bytearray opcodes with a length before the data."""
    width = _COUNTED_WIDTH[data[i]]
    scan.stack.append(0)
    return i + 1 + width + int.from_bytes(data[i + 1 : i + 1 + width], "little")


def _long(scan: _Scan, data: bytes, i: int) -> int:
    """LONG1, LONG4: bounded in size, and in number once big enough to collide."""
    width = 1 if data[i] == 0x8A else 4
    length = int.from_bytes(data[i + 1 : i + 1 + width], "little", signed=width == 4)
    if not 0 <= length <= MAX_INT_BYTES:
        raise _Refused(f"an integer of {length} bytes (the limit is {MAX_INT_BYTES})")
    if length >= 8:
        scan.big_ints += 1
        if scan.big_ints > MAX_BIG_INTS:
            raise _Refused(f"more than {MAX_BIG_INTS} integers of 8 bytes or more")
    scan.stack.append(0)
    return i + 1 + width + length


def _stack_global(scan: _Scan, data: bytes, i: int) -> int:
    """The name pair is checked by the unpickler's find_class: here, two strings."""
    if scan.stack.pop() != 0 or scan.stack.pop() != 0:
        raise _Refused("STACK_GLOBAL needs two strings")
    scan.stack.append(_RESTORE)
    return i + 1


def _pop(scan: _Scan, data: bytes, i: int) -> int:
    """POP: as in the C unpickler, a MARK on top goes instead of a value."""
    stack, marks = scan.stack, scan.marks
    if marks and marks[-1] == len(stack):
        marks.pop()
    elif len(stack) <= (marks[-1] if marks else 0):
        raise _Refused("POP below a mark")
    else:
        stack.pop()
    return i + 1


def _pop_mark(scan: _Scan, data: bytes, i: int) -> int:
    del scan.stack[scan.marks.pop() :]
    return i + 1


def _frame(scan: _Scan, data: bytes, i: int) -> int:
    return i + 9  # framing is checked by the unpickler itself


def _proto(scan: _Scan, data: bytes, i: int) -> int:
    if data[i + 1] > 5:
        raise _Refused(f"pickle protocol {data[i + 1]}")
    return i + 2


# Opcodes that push one scalar and have a fixed size: their total size in bytes.
_FIXED = bytearray(256)
for _op, _size in (
    (0x4E, 1),  # NONE
    (0x88, 1),  # NEWTRUE
    (0x89, 1),  # NEWFALSE
    (0x4B, 2),  # BININT1
    (0x4D, 3),  # BININT2
    (0x4A, 5),  # BININT
    (0x47, 9),  # BINFLOAT
):
    _FIXED[_op] = _size
_FIXED_SIZES = bytes(_FIXED)
# SHORT_BINBYTES, BINBYTES, BINBYTES8, BINUNICODE, BINUNICODE8, BYTEARRAY8: width of the length
_COUNTED_WIDTH = {0x43: 1, 0x42: 4, 0x8E: 8, 0x58: 4, 0x8D: 8, 0x96: 8}

_HANDLERS: list[_Handler] = [_refuse] * 256
for _ops, _handler in (
    ((0x7D, 0x5D, 0x8F), _empty_container),  # EMPTY_DICT, EMPTY_LIST, EMPTY_SET
    ((0x29,), _empty_tuple),  # EMPTY_TUPLE
    ((0x91,), _frozenset),  # FROZENSET
    ((0x61, 0x65, 0x73, 0x75, 0x90), _fill),  # APPEND(S), SETITEM(S), ADDITEMS
    ((0x6A,), _long_binget),  # LONG_BINGET
    (tuple(_COUNTED_WIDTH), _counted),
    ((0x8A, 0x8B), _long),  # LONG1, LONG4
    ((0x93,), _stack_global),  # STACK_GLOBAL
    ((0x30,), _pop),  # POP
    ((0x31,), _pop_mark),  # POP_MARK
    ((0x95,), _frame),  # FRAME
    ((0x80,), _proto),  # PROTO
):
    for _op in _ops:
        _HANDLERS[_op] = _handler
