"""PickleSerializer: round trips, the signed envelope, and refusing everything it should.

Attacks on the unpickler itself (poisoning shared objects, resource bombs, fuzzing) are in
``test_checkpoint_security.py``.
"""

from __future__ import annotations

import collections
import datetime
import enum
import hashlib
import hmac
import importlib
import io
import os
import pathlib
import pickle
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.checkpoint import FileCheckPointStore, PickleSerializer, Serializer
from agentkit.checkpoint._keys import key_id
from agentkit.errors import CheckpointError, ToolError
from agentkit.schema import FunctionCall, Message, ResponseMeta, Role, TokenUsage, ToolCall
from agentkit.streams import stream_from_list

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
HEADER_LEN = 9
KEY_ID_LEN = 8
MAC_LEN = 32

# Unsigned checkpoints warn on every write and read; tests that use them on purpose say so
# here once (test_unsigned_checkpoints_warn checks the warnings themselves).
pytestmark = pytest.mark.filterwarnings(
    "ignore::agentkit.checkpoint.UnsignedCheckpointWarning"
)


def envelope(
    payload: bytes, *, checkpoint_id: str, key: bytes | None = None, namespace: str = ""
) -> bytes:
    """Build a checkpoint envelope by hand, following the documented format (version 2)."""
    header = b"AGKCKPT" + bytes([2, 0 if key is None else 1])
    if key is None:
        return header + payload
    header += key_id(key)
    signed = header
    for text in (namespace, checkpoint_id):
        encoded = text.encode("utf-8")
        signed += len(encoded).to_bytes(4, "big") + encoded
    return header + hmac.new(key, signed + payload, hashlib.sha256).digest() + payload


def short_str(text: str) -> bytes:
    """The SHORT_BINUNICODE opcode for ``text``."""
    return b"\x8c" + bytes([len(text.encode())]) + text.encode()


def unsigned() -> PickleSerializer:
    """A serializer that writes and reads unsigned checkpoints."""
    return PickleSerializer(allow_unsigned=True)


def serializer_for(key: bytes | None, allowed_types: Any = ()) -> PickleSerializer:
    """Signed with ``key``, or unsigned for ``None``."""
    if key is None:
        return PickleSerializer(allowed_types=allowed_types, allow_unsigned=True)
    return PickleSerializer(key, allowed_types)


# -- user types ----------------------------------------------------------------------------


@attrs.define
class Order:
    number: int
    items: list[str] = attrs.Factory(list)


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


class PlainPoint:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainPoint) and (self.x, self.y) == (other.x, other.y)

    __hash__ = None  # type: ignore[assignment]


class Touch:
    """Unpickling this would create a file (os.system / open / Path.touch, by variant)."""

    def __init__(self, how: str, path: Path) -> None:
        self.how, self.path = how, path

    def __reduce__(self) -> Any:
        if self.how == "os.system":
            return (os.system, (f"touch {self.path}",))
        if self.how == "open":
            return (open, (str(self.path), "w"))
        if self.how == "Path.touch":
            return (pathlib.Path.touch, (self.path,))
        if self.how == "subprocess":
            return (subprocess.call, (["touch", str(self.path)],))
        if self.how == "exec":
            return (exec, (f"open({str(self.path)!r}, 'w').close()",))
        if self.how == "agentkit-class":
            # An agentkit class that is not a data type; constructing it makes a directory.
            return (FileCheckPointStore, (str(self.path),))
        raise AssertionError(self.how)


EXPLOITS = ["os.system", "open", "Path.touch", "subprocess", "exec", "agentkit-class"]


# -- strategies ----------------------------------------------------------------------------

hashables = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=10),
    st.binary(max_size=10),
    st.floats(allow_nan=False),
    st.uuids(),
    st.dates(),
)
timezones = st.one_of(
    st.none(),
    st.just(datetime.timezone.utc),
    st.builds(
        datetime.timezone,
        st.timedeltas(
            min_value=datetime.timedelta(hours=-23), max_value=datetime.timedelta(hours=23)
        ),
    ),
)
scalars = st.one_of(
    hashables,
    st.complex_numbers(allow_nan=False),
    st.decimals(allow_nan=False),
    st.fractions(),
    st.datetimes(timezones=timezones),
    st.times(),
    st.timedeltas(),
    st.builds(bytearray, st.binary(max_size=10)),
    st.sampled_from(Role),
)
tool_calls = st.builds(
    ToolCall,
    id=st.text(max_size=8),
    function=st.builds(FunctionCall, name=st.text(max_size=8), arguments=st.text(max_size=20)),
    index=st.none() | st.integers(0, 5),
)
messages = st.builds(
    Message,
    role=st.sampled_from(Role),
    content=st.text(max_size=30),
    tool_calls=st.lists(tool_calls, max_size=3),
    tool_call_id=st.text(max_size=8),
    response_meta=st.none()
    | st.builds(
        ResponseMeta, finish_reason=st.text(max_size=5), usage=st.none() | st.builds(TokenUsage)
    ),
    extra=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
values = st.recursive(
    st.one_of(scalars, messages, tool_calls),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(hashables, children, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.builds(
            collections.OrderedDict, st.dictionaries(st.text(max_size=4), children, max_size=3)
        ),
        st.builds(collections.deque, st.lists(children, max_size=3)),
    ),
    max_leaves=25,
)
checkpoint_ids = st.text(max_size=20)


# -- round trips ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(value=values, checkpoint_id=checkpoint_ids, keyed=st.booleans())
def test_allowed_values_round_trip(value: Any, checkpoint_id: str, keyed: bool) -> None:
    serializer = serializer_for(KEY if keyed else None)
    data = serializer.dumps(value, checkpoint_id=checkpoint_id)
    assert serializer.loads(data, checkpoint_id=checkpoint_id) == value


def test_agentkit_types_round_trip_with_their_types() -> None:
    serializer = PickleSerializer()
    message = Message(
        role=Role.ASSISTANT,
        content="hi",
        tool_calls=[ToolCall(id="c1", function=FunctionCall("pay", '{"x": 1}'), index=0)],
        response_meta=ResponseMeta("stop", TokenUsage(1, 2, 3)),
        extra={"k": [1, 2]},
    )
    value = {"messages": [message], "role": Role.TOOL, "type": Message}
    data = serializer.dumps(value, checkpoint_id="x")
    loaded = serializer.loads(data, checkpoint_id="x")
    assert loaded == value
    assert loaded["messages"][0].role is Role.ASSISTANT
    assert loaded["role"] is Role.TOOL
    assert loaded["type"] is Message
    # Classes are written by stable name, never by module path.
    assert b"agentkit.Message" in data
    assert b"agentkit.schema" not in data


def test_builtin_and_agentkit_errors_round_trip() -> None:
    serializer = PickleSerializer()
    errors = [ValueError("bad", 1), KeyError("k"), ToolError("boom", tool_name="pay", call_id="c1")]
    loaded = serializer.loads(serializer.dumps(errors, checkpoint_id="e"), checkpoint_id="e")
    assert [type(error) for error in loaded] == [ValueError, KeyError, ToolError]
    assert [error.args for error in loaded] == [("bad", 1), ("k",), ("boom",)]
    assert (loaded[2].tool_name, loaded[2].call_id) == ("pay", "c1")


def test_allowed_user_types_round_trip() -> None:
    serializer = PickleSerializer(allowed_types=[Order, Priority, PlainPoint])
    value = {"order": Order(7, ["tea"]), "priority": Priority.HIGH, "point": PlainPoint(1, 2)}
    assert serializer.loads(serializer.dumps(value, checkpoint_id="u"), checkpoint_id="u") == value


def test_the_envelope_has_the_documented_layout() -> None:
    payload_only = pickle.dumps({"a": 1}, protocol=5)
    keyless = unsigned().dumps({"a": 1}, checkpoint_id="id")
    assert keyless == envelope(payload_only, checkpoint_id="id")
    keyed = PickleSerializer(KEY).dumps({"a": 1}, checkpoint_id="id", namespace="ns")
    assert keyed == envelope(payload_only, checkpoint_id="id", key=KEY, namespace="ns")
    assert keyed[HEADER_LEN + KEY_ID_LEN + MAC_LEN :] == payload_only


def test_the_serializer_satisfies_the_serializer_protocol() -> None:
    assert isinstance(PickleSerializer(), Serializer)


def test_constructor_validates_its_arguments() -> None:
    with pytest.raises(TypeError, match=r"not str: pass secret.encode\('utf-8'\)"):
        PickleSerializer("text key")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 16"):
        PickleSerializer(b"")
    with pytest.raises(ValueError, match="15 bytes long; use at least 16"):
        PickleSerializer(b"x" * 15)
    with pytest.raises(ValueError, match="max_bytes"):
        PickleSerializer(KEY, max_bytes=0)
    with pytest.raises(TypeError, match="classes only"):
        PickleSerializer(allowed_types=[len])  # type: ignore[list-item]

    class Local:
        pass

    with pytest.raises(TypeError, match="inside a function"):
        PickleSerializer(allowed_types=[Local])
    # ... unless given a stable name.
    named = PickleSerializer(KEY, {"tests.Local": Local})
    assert type(named.loads(named.dumps(Local(), checkpoint_id="x"), checkpoint_id="x")) is Local


def test_user_types_can_have_stable_names_that_survive_a_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    serializer = PickleSerializer(KEY, {"shop.Order": Order})
    data = serializer.dumps(Order(3, ["tea"]), checkpoint_id="x")
    assert b"shop.Order" in data
    assert Order.__module__.encode() not in data
    monkeypatch.setattr(Order, "__module__", "shop.moved.somewhere")
    assert serializer.loads(data, checkpoint_id="x") == Order(3, ["tea"])


def test_repr_does_not_show_the_key() -> None:
    text = repr(PickleSerializer(b"very-secret-key-of-32-bytes-long", allowed_types=[Order]))
    assert "very-secret" not in text
    assert "signed=True" in text
    assert "Order" in text


# -- refusing on dumps ---------------------------------------------------------------------


def test_dumps_refuses_a_disallowed_type_naming_it() -> None:
    name = f"{Order.__module__}.Order"
    value = {"history": [Message(role=Role.USER, extra={"order": Order(1)})]}
    with pytest.raises(CheckpointError) as caught:
        PickleSerializer(KEY).dumps(value, checkpoint_id="x")
    assert str(caught.value) == (
        f"cannot checkpoint value of type {name!r}: "
        f"add it to PickleSerializer(allowed_types=[{name}])"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (len, "cannot checkpoint function 'builtins.len'"),
        (os.system, "cannot checkpoint function '"),
        (lambda: 1, "cannot checkpoint function '"),
        ([].append, "cannot checkpoint function '"),
        (Message.to_dict, "cannot checkpoint function 'agentkit.schema.Message.to_dict'"),
        (os, "cannot checkpoint module 'os'"),
        (object(), "cannot checkpoint value of type 'builtins.object'"),
        (type, "cannot checkpoint value of type 'builtins.type'"),
        (range(3), "cannot checkpoint value of type 'builtins.range'"),
        (slice(1, 2), "cannot checkpoint value of type 'builtins.slice'"),
        (Path("/tmp"), "cannot checkpoint value of type 'pathlib."),
        (io.BytesIO(), "cannot checkpoint value of type '_io.BytesIO'"),
        (collections.defaultdict(list), "'collections.defaultdict'"),
        (Priority.LOW, "Priority"),
        (stream_from_list([1]), "it has no stable persisted name"),
        (PickleSerializer(KEY), "it has no stable persisted name"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_dumps_refuses_what_loads_would_refuse(value: Any, message: str) -> None:
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(".", r"\.")):
        PickleSerializer(KEY).dumps({"nested": [value]}, checkpoint_id="x")


def test_dumps_refuses_an_agentkit_class_without_a_stable_name_naming_it() -> None:
    with pytest.raises(CheckpointError) as caught:
        PickleSerializer(KEY).dumps([FileCheckPointStore], checkpoint_id="x")
    assert "'agentkit.checkpoint.FileCheckPointStore'" in str(caught.value)
    assert "no stable persisted name" in str(caught.value)


def test_dumps_refuses_an_allowed_type_whose_reduce_names_a_function(tmp_path: Path) -> None:
    serializer = PickleSerializer(KEY, allowed_types=[Touch])
    for how, called in [("os.system", "system"), ("Path.touch", "Path.touch"), ("exec", "exec")]:
        with pytest.raises(CheckpointError, match=f"rebuilds it by calling '{called}'"):
            serializer.dumps(Touch(how, tmp_path / "x"), checkpoint_id="x")
    assert list(tmp_path.iterdir()) == []


def test_dumps_refuses_values_nested_too_deeply() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(CheckpointError, match="nested too deeply"):
        PickleSerializer(KEY).dumps(value, checkpoint_id="x")


def test_dumps_refuses_a_checkpoint_over_max_bytes() -> None:
    serializer = PickleSerializer(KEY, max_bytes=1000)
    assert serializer.max_bytes == 1000
    serializer.dumps("x" * 800, checkpoint_id="x")
    with pytest.raises(CheckpointError, match="over max_bytes=1000"):
        serializer.dumps("x" * 1000, checkpoint_id="x")


# -- refusing on loads ---------------------------------------------------------------------


def test_a_foreign_raw_pickle_is_refused() -> None:
    with pytest.raises(CheckpointError, match="'x' is not an agentkit checkpoint"):
        PickleSerializer(KEY).loads(pickle.dumps({"a": 1}), checkpoint_id="x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is empty"),
        (b"AGK", "is truncated"),
        (b"AGKCKPT", "is truncated"),
        (b"AGKCKPT\x03\x01" + b"k" * 40 + pickle.dumps(1), "written by a newer agentkit; upgrade"),
        (b"AGKCKPT\xff\x00" + pickle.dumps(1, protocol=5), "newer agentkit; upgrade agentkit"),
        (b"AGKCKPT\x01\x00" + pickle.dumps(1, protocol=5), "format version 1, written by"),
        (b"AGKCKPT\x01\x01" + b"m" * 40, "format version 1"),
        (b"AGKCKPT\x00\x00" + pickle.dumps(1, protocol=5), "is corrupt"),
        (b"AGKCKPT\x02\x04" + pickle.dumps(1, protocol=5), "is corrupt .*flags 0x04"),
        (b"AGKCKPT\x02\x00not a pickle at all", "is refused"),
        (b"AGKCKPT\x02\x00" + pickle.dumps(1, protocol=5)[:-1], "truncated"),
        (b"AGKCKPT\x02\x00" + pickle.dumps(1, protocol=5) + b"junk", "unexpected bytes"),
        (b'{"json": true}', "not an agentkit checkpoint"),
    ],
)
def test_corrupt_data_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        unsigned().loads(data, checkpoint_id="x")


def test_an_unsigned_checkpoint_is_refused_by_default() -> None:
    data = unsigned().dumps(1, checkpoint_id="x")
    with pytest.raises(CheckpointError, match="is not signed; refusing to load it"):
        PickleSerializer(KEY).loads(data, checkpoint_id="x")
    with pytest.raises(CheckpointError, match="is not signed"):
        PickleSerializer().loads(data, checkpoint_id="x")


def test_loads_refuses_data_over_max_bytes_before_looking_at_it() -> None:
    serializer = PickleSerializer(KEY, max_bytes=100)
    with pytest.raises(CheckpointError, match="101 bytes, over max_bytes=100"):
        serializer.loads(b"AGKCKPT" + b"\x00" * 94, checkpoint_id="x")


def test_a_signed_checkpoint_shorter_than_its_mac_is_truncated() -> None:
    with pytest.raises(CheckpointError, match="is truncated"):
        PickleSerializer(KEY).loads(b"AGKCKPT\x02\x01" + b"m" * 10, checkpoint_id="x")


def test_loads_refuses_a_type_the_reader_does_not_allow() -> None:
    data = PickleSerializer(KEY, allowed_types=[Order]).dumps(Order(1), checkpoint_id="x")
    name = f"{Order.__module__}.Order"
    with pytest.raises(CheckpointError, match=rf"names type '{name}', which this serializer"):
        PickleSerializer(KEY).loads(data, checkpoint_id="x")


def test_loads_refuses_persistent_ids() -> None:
    class WithPid(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return "pid" if obj == "secret" else None

    buffer = io.BytesIO()
    WithPid(buffer, protocol=5).dump(["secret"])
    with pytest.raises(CheckpointError, match="not allowed in checkpoints"):
        unsigned().loads(envelope(buffer.getvalue(), checkpoint_id="x"), checkpoint_id="x")


@pytest.mark.parametrize(
    "global_name",
    [
        "builtins eval",
        "builtins exec",
        "builtins getattr",
        "builtins __import__",
        "builtins object",
        "builtins type",
        "builtins open",
        "os system",
        "posix system",
        "subprocess Popen",
        "copyreg _reconstructor",
        "collections defaultdict",
        "functools partial",
        "agentkit.schema concat_messages",
        "agentkit.schema attrs",
        "agentkit.schema Any",
        "agentkit.schema Message.__init__",
        "agentkit.schema Message.to_dict",
        "agentkit.checkpoint.serializer PickleSerializer",
        "agentkit.checkpoint.file os",
        "agentkit.checkpoint.file FileCheckPointStore",
        "agentkit.no_such_module Thing",
        "agentkit..schema Message",
        "agentkit.schema.__builtins__ eval",
        "agentkit.__main__ X",
        "agentkit.schema Message",
        "agentkit.schema Role",
        "agentkit.errors CheckpointBusyError",
        "agentkit.checkpoint _codec",
        "agentkit.checkpoint._codec _restore",
    ],
)
def test_loads_refuses_globals_that_are_not_allowed(global_name: str) -> None:
    module, name = global_name.split(" ")
    for payload in (
        b"\x80\x05c" + module.encode() + b"\n" + name.encode() + b"\n.",
        b"\x80\x05" + short_str(module) + short_str(name) + b"\x93.",
    ):
        for key in (None, KEY):
            data = envelope(payload, checkpoint_id="x", key=key)
            with pytest.raises(CheckpointError, match="is refused"):
                serializer_for(key).loads(data, checkpoint_id="x")


def test_agentkit_types_are_found_by_stable_name_wherever_their_module_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    serializer = PickleSerializer(KEY)
    data = serializer.dumps([Message(role=Role.USER, content="hi")], checkpoint_id="x")
    assert b"agentkit.schema" not in data
    monkeypatch.setattr(Message, "__module__", "agentkit.moved_elsewhere")
    monkeypatch.setattr(Role, "__module__", "agentkit.moved_elsewhere")
    loaded = serializer.loads(data, checkpoint_id="x")
    assert loaded == [Message(role=Role.USER, content="hi")]
    assert loaded[0].role is Role.USER


def test_every_persisted_name_resolves_to_the_live_class() -> None:
    from agentkit._persist import persisted_names
    from agentkit.checkpoint import _codec

    for module in _codec._PERSISTED_MODULES:
        importlib.import_module(module)
    names = persisted_names()
    assert {"agentkit.Message", "agentkit.Role", "agentkit.Checkpoint"} <= set(names)
    for name, cls in names.items():
        # the module a class presents itself under, imported as pickle would (a class defined
        # in a private module names the public one that exports it, loaded on first import)
        live = getattr(importlib.import_module(cls.__module__), cls.__qualname__, None)
        assert live is cls, f"{name} is registered for a class that is not the one in use"


@pytest.mark.parametrize("how", EXPLOITS)
@pytest.mark.parametrize("key", [None, KEY], ids=["keyless", "signed-with-the-key"])
def test_a_malicious_pickle_executes_nothing(how: str, key: bytes | None, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    payload = pickle.dumps(Touch(how, target), protocol=5)
    data = envelope(payload, checkpoint_id="x", key=key)
    with pytest.raises(CheckpointError, match="is refused"):
        serializer_for(key).loads(data, checkpoint_id="x")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_malicious_pickle_signed_with_another_key_fails_the_signature_first(
    tmp_path: Path,
) -> None:
    target = tmp_path / "pwned"
    data = envelope(pickle.dumps(Touch("open", target)), checkpoint_id="x", key=OTHER_KEY)
    with pytest.raises(CheckpointError, match="signed with another key"):
        PickleSerializer(KEY).loads(data, checkpoint_id="x")
    assert not target.exists()


# -- tampering -----------------------------------------------------------------------------

sample = {"messages": [Message(role=Role.USER, content="pay 100 EUR")], "approved": False}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_flipped_byte_of_a_signed_checkpoint_is_refused(data: st.DataObject) -> None:
    serializer = PickleSerializer(KEY)
    blob = bytearray(serializer.dumps(sample, checkpoint_id="run"))
    position = data.draw(st.integers(0, len(blob) - 1))
    blob[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CheckpointError):
        serializer.loads(bytes(blob), checkpoint_id="run")


@settings(max_examples=300, deadline=None)
@given(data=st.data(), keyed=st.booleans())
def test_any_truncation_or_extension_is_refused(data: st.DataObject, keyed: bool) -> None:
    serializer = serializer_for(KEY if keyed else None)
    blob = serializer.dumps(sample, checkpoint_id="run")
    if data.draw(st.booleans()):
        damaged = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        damaged = blob + data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(CheckpointError):
        serializer.loads(damaged, checkpoint_id="run")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_flipped_bytes_of_an_unsigned_checkpoint_load_or_raise_checkpoint_error(
    data: st.DataObject,
) -> None:
    serializer = unsigned()
    blob = bytearray(serializer.dumps(sample, checkpoint_id="run"))
    for _ in range(data.draw(st.integers(1, 3))):
        blob[data.draw(st.integers(0, len(blob) - 1))] ^= data.draw(st.integers(1, 255))
    try:
        serializer.loads(bytes(blob), checkpoint_id="run")
    except CheckpointError:
        pass


def test_loads_refuses_non_bytes_and_non_str_ids() -> None:
    serializer = PickleSerializer(KEY)
    with pytest.raises(TypeError, match="must be bytes"):
        serializer.loads("text", checkpoint_id="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="checkpoint_id must be a str"):
        serializer.dumps(1, checkpoint_id=1)  # type: ignore[arg-type]


# -- signing many values: the prepared key and the bound encoder --------------------------------


@given(
    key=st.binary(min_size=16, max_size=200),
    parts=st.lists(st.binary(max_size=300), max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_a_prepared_key_signs_the_same_bytes_as_hmac(key: bytes, parts: list[bytes]) -> None:
    from agentkit.checkpoint._mac import MacKey

    expected = hmac.digest(key, b"".join(parts), "sha256")
    prepared = MacKey(key)
    assert prepared.digest(*parts) == expected
    assert prepared.digest(*parts) == expected  # the prepared states are not used up
    if parts:
        assert prepared.extended(*parts[:1]).digest(*parts[1:]) == expected


def test_the_bound_encoder_writes_exactly_what_dumps_writes() -> None:
    serializer = PickleSerializer(secret_key=KEY)
    encode = serializer.bound_encoder(checkpoint_id="run-7", namespace="store-a")
    values: list[Any] = [
        {"step": n, "reply": Message(role=Role.ASSISTANT, content=f"answer {n}")} for n in range(5)
    ]
    values.insert(2, [Message(role=Role.USER, content="shared")] * 3)  # the memo, then cleared
    for value in values:
        data = encode(value)
        assert data == serializer.dumps(value, checkpoint_id="run-7", namespace="store-a")
        assert serializer.loads(data, checkpoint_id="run-7", namespace="store-a") == value
    # a value it refuses leaves nothing behind for the next one
    with pytest.raises(CheckpointError, match="lambda"):
        encode({"ok": [1, 2], "bad": lambda: None})
    assert encode(values[0]) == serializer.dumps(
        values[0], checkpoint_id="run-7", namespace="store-a"
    )
    # bound to its id and namespace: another id or store refuses the record
    with pytest.raises(CheckpointError, match="signature"):
        serializer.loads(encode(values[0]), checkpoint_id="run-8", namespace="store-a")
    with pytest.raises(CheckpointError, match="signature"):
        serializer.loads(encode(values[0]), checkpoint_id="run-7", namespace="store-b")


def test_the_bound_encoder_keeps_max_bytes() -> None:
    serializer = PickleSerializer(secret_key=KEY, max_bytes=200)
    encode = serializer.bound_encoder(checkpoint_id="run-1")
    with pytest.raises(CheckpointError, match="over max_bytes=200"):
        encode("x" * 500)
    assert serializer.loads(encode("small"), checkpoint_id="run-1") == "small"
