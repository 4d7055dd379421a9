"""What the checkpoint serializer remembers between checkpoints, and that it stays safe.

The reader keeps what each restore tag resolved to, the writer keeps its class shapes, and
``lease_for`` keeps which store classes passed the lease protocol check. Each is bounded or
limited to verdicts that cannot change, and every per-object check still runs. Also here: the
opcode check's depth limit, exact through tuples, containers and restored objects.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from agentkit.checkpoint import (
    InMemoryCheckPointStore,
    LeasingCheckPointStore,
    PickleSerializer,
    _codec,
    _decode,
    base,
    lease_for,
)
from agentkit.checkpoint._attrs_state import attrs_field_names
from agentkit.checkpoint._scan import check_stream
from agentkit.errors import CheckpointError
from agentkit.schema import FunctionCall, Message, Role, ToolCall

pytestmark = pytest.mark.filterwarnings(
    "ignore::agentkit.checkpoint.serializer.UnsignedCheckpointWarning"
)

HEADER = b"AGKCKPT\x02\x00"  # version 2, unsigned


def s(text: str) -> bytes:
    """SHORT_BINUNICODE ``text``."""
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


RESTORE = s("agentkit.checkpoint") + s("_restore") + b"\x93"


def short_call(name: str, keys: list[str], values: list[bytes]) -> bytes:
    """Push ``_restore(("S" + name, *keys), *values)``."""
    tag = b"(" + s("S" + name) + b"".join(s(key) for key in keys) + b"t"
    return RESTORE + b"(" + tag + b"".join(values) + b"tR"


def reader() -> PickleSerializer:
    return PickleSerializer(allow_unsigned=True)


def load(serializer: PickleSerializer, payload: bytes) -> Any:
    return serializer.loads(HEADER + b"\x80\x05" + payload + b".", checkpoint_id="x")


# -- the reader's tags ----------------------------------------------------------------------


def test_the_reader_resolves_each_tag_once_for_all_loads() -> None:
    serializer = reader()
    value = [Message(role=Role.USER, content="a"), Message(role=Role.TOOL, content="b")]
    data = serializer.dumps(value, checkpoint_id="x")
    assert serializer.loads(data, checkpoint_id="x") == value
    shorts = dict(serializer._reader._shorts)
    assert any(tag[0] == "Sagentkit.Message" for tag in shorts)
    assert serializer.loads(data, checkpoint_id="x") == value
    assert serializer._reader._shorts == shorts  # nothing new to resolve the second time


def test_a_remembered_tag_still_checks_every_object() -> None:
    serializer = reader()
    call = FunctionCall("f", "{}")
    serializer.loads(serializer.dumps(call, checkpoint_id="x"), checkpoint_id="x")
    keys = ["name", "arguments"]
    assert any(tag[1:] == tuple(keys) for tag in serializer._reader._shorts)
    one_value_short = short_call("agentkit.FunctionCall", keys, [s("f")])
    with pytest.raises(CheckpointError, match="bad state for 'agentkit.FunctionCall'"):
        load(serializer, one_value_short)


def test_the_reader_remembers_at_most_max_cached_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_decode, "MAX_CACHED_TAGS", 3)
    serializer = reader()
    calls = [short_call("agentkit.RunStep", [f"field{i}"], [s("v")]) for i in range(6)]
    payload = b"]" + b"".join(call + b"a" for call in calls)
    loaded = load(serializer, payload)
    assert [type(step).__name__ for step in loaded] == ["RunStep"] * 6
    assert len(serializer._reader._shorts) == 3
    assert len(load(serializer, payload)) == 6  # tags past the bound still resolve


def test_an_unknown_tag_is_not_remembered() -> None:
    serializer = reader()
    with pytest.raises(CheckpointError, match="names type 'agentkit.Nope'"):
        load(serializer, short_call("agentkit.Nope", ["a"], [b"N"]))
    with pytest.raises(CheckpointError, match="bad restore call"):
        load(serializer, short_call("agentkit.Message", ["__class__"], [b"N"]))
    assert serializer._reader._shorts == {}
    assert serializer._reader._builders == {}


def test_attrs_classes_get_their_values_as_a_tuple_only_in_field_order() -> None:
    assert attrs_field_names(FunctionCall.__setstate__) == ("name", "arguments")
    assert attrs_field_names(Message.__setstate__) is None  # its own __setstate__
    serializer = reader()
    in_order = short_call("agentkit.FunctionCall", ["name", "arguments"], [s("f"), s("{}")])
    assert load(serializer, in_order) == FunctionCall("f", "{}")
    reordered = short_call("agentkit.FunctionCall", ["arguments", "name"], [s("{}"), s("f")])
    assert load(serializer, reordered) == FunctionCall("f", "{}")
    only_name = short_call("agentkit.FunctionCall", ["name"], [s("g")])
    loaded = load(serializer, only_name)
    assert loaded.name == "g"
    with pytest.raises(AttributeError):
        loaded.arguments  # noqa: B018 (never set: as pickle would leave it)
    positional = {tag[1:]: short[4] for tag, short in serializer._reader._shorts.items()}
    assert positional == {
        ("name", "arguments"): True,
        ("arguments", "name"): False,
        ("name",): False,
    }


# -- the writer's shapes --------------------------------------------------------------------


def test_the_writer_keeps_its_shapes_across_checkpoints() -> None:
    serializer = reader()
    value = [ToolCall(id="c", function=FunctionCall("f", "{}"))] * 2
    first = serializer.dumps(value, checkpoint_id="x")
    specs = dict(serializer._table.specs)
    assert specs and serializer._table.short_tags
    second = serializer.dumps(value, checkpoint_id="x")
    assert first == second
    assert serializer._table.specs == specs
    assert serializer.loads(second, checkpoint_id="x") == value


def test_past_max_specs_the_writer_still_writes_correct_checkpoints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_codec, "_MAX_SPECS", 1)
    serializer = reader()
    value = [Message(role=Role.USER, content="a", tool_calls=[ToolCall(id="c")])] * 3
    data = serializer.dumps(value, checkpoint_id="x")
    assert len(serializer._table.specs) == 1
    loaded = serializer.loads(data, checkpoint_id="x")
    assert loaded == value
    assert loaded[0] is loaded[1]  # shared references survive either way


@attrs.define
class Pair:
    """Two fields, attrs' own __getstate__: written through a field getter."""

    left: Any = None
    right: Any = None


@attrs.define
class PairWithOwnState(Pair):
    """Overrides __getstate__: written from the dict it returns."""

    def __getstate__(self) -> dict[str, Any]:
        return {"left": self.left, "right": "overridden"}


def test_attrs_fields_are_read_by_a_getter_and_write_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = {
        "pairs": [Pair(1, [2]), Pair("a", Pair(None, 3.5))],
        "own": PairWithOwnState(1, 2),
        "calls": [ToolCall(id="c", function=FunctionCall("f", "{}"))] * 2,
    }
    fast = PickleSerializer(allow_unsigned=True, allowed_types=[Pair, PairWithOwnState])
    first = fast.dumps(value, checkpoint_id="x")
    second = fast.dumps(value, checkpoint_id="x")
    getters = fast._table.field_getters
    assert Pair in getters and FunctionCall in getters
    assert PairWithOwnState not in getters and ToolCall not in getters  # their own state
    monkeypatch.setattr(_codec, "attrs_field_names", lambda method: None)
    slow = PickleSerializer(allow_unsigned=True, allowed_types=[Pair, PairWithOwnState])
    assert slow.dumps(value, checkpoint_id="x") == first == second
    assert slow._table.field_getters == {}
    loaded = fast.loads(first, checkpoint_id="x")
    assert loaded["own"].right == "overridden"
    assert loaded == {**value, "own": PairWithOwnState(1, "overridden")}


# -- the opcode check's depth ---------------------------------------------------------------


def nested_tuples(depth: int) -> bytes:
    return b")" + b"\x85" * (depth - 1)


@pytest.mark.parametrize(
    ("what", "at_limit", "over_limit"),
    [
        ("tuples", nested_tuples(4), nested_tuples(5)),
        ("a list in tuples", b"]" + b"\x85" * 3, b"]" + b"\x85" * 4),
        ("a tuple in a list", b"]" + nested_tuples(3) + b"a", b"]" + nested_tuples(4) + b"a"),
        ("tuples of scalars", b"(NN" + b"t" + b"\x85" * 3, b"(NN" + b"t" + b"\x85" * 4),
        (
            "a restored object",
            RESTORE + s("Ex") + b"\x85R" + b"\x85" * 2,
            RESTORE + s("Ex") + b"\x85R" + b"\x85" * 3,
        ),
    ],
)
def test_the_depth_limit_is_exact(what: str, at_limit: bytes, over_limit: bytes) -> None:
    check_stream(b"\x80\x05" + at_limit + b".", max_depth=4, max_objects=100)
    with pytest.raises(CheckpointError, match="nested deeper than 4 levels"):
        check_stream(b"\x80\x05" + over_limit + b".", max_depth=4, max_objects=100)


def test_a_tuple_holding_the_restore_function_is_refused() -> None:
    with pytest.raises(CheckpointError, match="restore function itself cannot be stored"):
        check_stream(b"\x80\x05" + RESTORE + b"N\x86.", max_depth=4, max_objects=100)


# -- lease protocol checks ------------------------------------------------------------------


class PlainStore:
    """A store without lease methods of its own (an instance may be given some)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.leased: list[str] = []

    def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data

    def delete(self, checkpoint_id: str) -> None:
        self.data.pop(checkpoint_id, None)


def test_a_store_class_with_lease_methods_is_remembered() -> None:
    store = InMemoryCheckPointStore()
    with lease_for(store, "a"):
        assert LeasingCheckPointStore in base._CONFORMING[InMemoryCheckPointStore]
        with pytest.raises(CheckpointError):  # CheckpointBusyError: the store's own lease
            lease_for(store, "a")


def test_lease_methods_on_one_instance_are_checked_per_instance() -> None:
    leasing = PlainStore()

    def acquire_lease(checkpoint_id: str, owner: str, ttl: float) -> bool:
        leasing.leased.append(checkpoint_id)
        return True

    leasing.acquire_lease = acquire_lease  # type: ignore[attr-defined]
    leasing.release_lease = lambda checkpoint_id, owner: None  # type: ignore[attr-defined]
    plain = PlainStore()
    lease_for(leasing, "a").release()
    assert leasing.leased == ["a"]
    assert PlainStore not in base._CONFORMING
    # The process-local registry: exclusive within the process.
    with lease_for(plain, "a"), pytest.raises(CheckpointError):
        lease_for(plain, "a")
    lease_for(leasing, "b").release()
    assert leasing.leased == ["a", "b"]
