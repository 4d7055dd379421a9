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
  memory and the time of loading), nesting deeper than ``max_depth``, truncation and trailing
  data.

Depth is exact: a container's depth is final when it is placed into another one, because it
cannot change afterwards.
"""

from __future__ import annotations

import itertools

from agentkit.errors import CheckpointError

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
_RESTORE = -1  # stack placeholder for the restore global


class _Box:
    """A mutable container on the simulated stack (shared with the memo, so aliases see it)."""

    __slots__ = ("depth", "kind", "placed")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.depth = 1
        self.placed = False


# Placeholders: an int is an immutable value of that nesting depth (0 for scalars); a _Box is
# a list/dict/set being built; _RESTORE is the restore function.
_Item = int | _Box


def _depth(item: _Item) -> int:
    return item.depth if isinstance(item, _Box) else item


def check_stream(data: bytes, *, max_depth: int, max_objects: int) -> None:
    """Raise :class:`CheckpointError` unless ``data`` is a payload the checkpoint pickler writes.

    Only the shape is checked; which class names the restore global accepts is decided when it
    is called.
    """
    try:
        _check(data, max_depth, max_objects)
    except _Refused as exc:
        raise CheckpointError(str(exc)) from None
    except IndexError:  # read past the end, an empty stack or mark stack, a missing memo entry
        raise CheckpointError("the pickle stream is truncated or malformed") from None


class _Refused(Exception):
    pass


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
_COUNTED_WIDTH = {0x43: 1, 0x42: 4, 0x8E: 8, 0x8D: 8, 0x96: 8}  # bytes, str and bytearray


def _check(data: bytes, max_depth: int, max_objects: int) -> None:
    # One flat loop with the hottest opcodes first and the common tuple sizes inlined: this
    # runs on every load. Every opcode makes at most one object or memo entry, so bounding
    # the number of opcodes (for free, by the loop) bounds objects, memory and time alike.
    fixed = _FIXED_SIZES
    stack: list[_Item] = []
    push = stack.append
    pop = stack.pop
    marks: list[int] = []
    memo: list[_Item] = []
    remember = memo.append
    i = 0
    big_ints = 0
    from_bytes = int.from_bytes
    for _ in itertools.repeat(None, max_objects):
        op = data[i]
        if op == 0x94:  # MEMOIZE
            remember(stack[-1])
            i += 1
        elif op == 0x68:  # BINGET
            push(memo[data[i + 1]])
            i += 2
        elif op == 0x8C:  # SHORT_BINUNICODE
            i += 2 + data[i + 1]
            push(0)
        elif fixed[op]:
            push(0)
            i += fixed[op]
        elif op == 0x87 or op == 0x86:  # TUPLE3, TUPLE2  # noqa: PLR1714
            count = op - 0x84
            if marks and marks[-1] > len(stack) - count:
                raise _Refused("a tuple opcode reaches below its mark")
            items = stack[-count:]
            if len(items) != count:
                raise _Refused("a tuple opcode reaches below the bottom of the stack")
            deepest = 0
            for item in items:
                if type(item) is not int or item < 0:
                    break  # a container or the restore function: the slow path decides
                if item > deepest:  # noqa: PLR1730 (faster than max() in this loop)
                    deepest = item
            else:
                del stack[-count:]
                push(_deeper(deepest, max_depth))
                i += 1
                continue
            push(_place(stack, len(stack) - count, max_depth))
            i += 1
        elif op == 0x52:  # REDUCE
            args = pop()
            if pop() != _RESTORE or type(args) is not int or args < 1:
                raise _Refused("REDUCE may only apply the restore function to a tuple")
            push(_deeper(args, max_depth))
            i += 1
        elif op == 0x28:  # MARK
            marks.append(len(stack))
            i += 1
        elif op == 0x29:  # EMPTY_TUPLE
            push(1)
            i += 1
        elif op in (0x7D, 0x5D, 0x8F):  # EMPTY_DICT, EMPTY_LIST, EMPTY_SET
            push(_Box(_DICT if op == 0x7D else _LIST if op == 0x5D else _SET))
            i += 1
        elif op in (0x85, 0x74, 0x91):  # TUPLE1, TUPLE, FROZENSET
            start = len(stack) - 1 if op == 0x85 else marks.pop()
            if op == 0x85 and marks and marks[-1] > start:
                raise _Refused("a tuple opcode reaches below its mark")
            push(_place(stack, start, max_depth))
            i += 1
        elif op in (0x61, 0x65, 0x73, 0x75, 0x90):  # APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS
            if op == 0x61:
                start, kind = len(stack) - 1, _LIST
            elif op == 0x73:
                start, kind = len(stack) - 2, _DICT
            else:
                start = marks.pop()
                kind = _LIST if op == 0x65 else _DICT if op == 0x75 else _SET
                if kind == _DICT and (len(stack) - start) % 2:
                    raise _Refused("SETITEMS with an odd number of items")
            if start < 1 or (marks and marks[-1] > start - 1):
                raise _Refused("a container opcode reaches below its mark")
            target = stack[start - 1]
            if not isinstance(target, _Box) or target.kind != kind:
                raise _Refused(f"only a {_KIND_NAMES[kind]} built by the checkpoint can be filled")
            if target.placed:
                raise _Refused("a container is changed after it was placed (a reference cycle?)")
            target.depth = max(target.depth, _place(stack, start, max_depth))
            if target.placed:  # it was among its own items
                raise _Refused("a container holds itself (a reference cycle)")
            i += 1
        elif op == 0x6A:  # LONG_BINGET
            push(memo[from_bytes(data[i + 1 : i + 5], "little")])
            i += 5
        elif op in _COUNTED_WIDTH:  # SHORT_BINBYTES, BINBYTES, BINBYTES8, BINUNICODE8, BYTEARRAY8
            width = _COUNTED_WIDTH[op]
            i += 1 + width + from_bytes(data[i + 1 : i + 1 + width], "little")
            push(0)
        elif op == 0x58:  # BINUNICODE
            i += 5 + from_bytes(data[i + 1 : i + 5], "little")
            push(0)
        elif op in (0x8A, 0x8B):  # LONG1, LONG4
            width = 1 if op == 0x8A else 4
            length = from_bytes(data[i + 1 : i + 1 + width], "little", signed=op == 0x8B)
            if not 0 <= length <= MAX_INT_BYTES:
                raise _Refused(f"an integer of {length} bytes (the limit is {MAX_INT_BYTES})")
            if length >= 8:
                big_ints += 1
                if big_ints > MAX_BIG_INTS:
                    raise _Refused(f"more than {MAX_BIG_INTS} integers of 8 bytes or more")
            i += 1 + width + length
            push(0)
        elif op == 0x93:  # STACK_GLOBAL: the name pair is checked by find_class
            if pop() != 0 or pop() != 0:
                raise _Refused("STACK_GLOBAL needs two strings")
            push(_RESTORE)
            i += 1
        elif op == 0x30:  # POP: as in the C unpickler, a MARK on top goes instead of a value
            if marks and marks[-1] == len(stack):
                marks.pop()
            elif len(stack) <= (marks[-1] if marks else 0):
                raise _Refused("POP below a mark")
            else:
                pop()
            i += 1
        elif op == 0x31:  # POP_MARK
            del stack[marks.pop() :]
            i += 1
        elif op == 0x95:  # FRAME: framing is checked by the unpickler itself
            i += 9
        elif op == 0x80:  # PROTO
            if data[i + 1] > 5:
                raise _Refused(f"pickle protocol {data[i + 1]}")
            i += 2
        elif op == 0x2E:  # STOP
            if len(stack) != 1 or marks or stack[0] == _RESTORE:
                raise _Refused("the stream does not end with exactly one value")
            if i + 1 != len(data):
                raise _Refused("unexpected bytes after the payload")
            return
        else:
            raise _Refused(f"pickle opcode {bytes([op])!r} is not allowed in checkpoints")
    raise _Refused(f"more than {max_objects} objects (pickle opcodes)")


def _deeper(depth: int, max_depth: int) -> int:
    if depth + 1 > max_depth:
        raise _Refused(f"values nested deeper than {max_depth} levels")
    return depth + 1


def _place(stack: list[_Item], start: int, max_depth: int) -> int:
    """Pop ``stack[start:]`` into a new container; return the depth that container reaches."""
    if start < 0:
        raise _Refused("an opcode reaches below the bottom of the stack")
    deepest = 0
    for item in stack[start:]:
        if isinstance(item, _Box):
            item.placed = True
            depth = item.depth
        elif item == _RESTORE:
            raise _Refused("the restore function itself cannot be stored")
        else:
            depth = item
        deepest = max(deepest, depth)
    del stack[start:]
    if deepest + 1 > max_depth:
        raise _Refused(f"values nested deeper than {max_depth} levels")
    return deepest + 1
