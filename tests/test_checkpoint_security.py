"""Attacks on checkpoint loading: shared-state poisoning, resource bombs, bit flips, fuzzing.

Every hostile payload here is read by an unsigned-accepting serializer, so it reaches the
unpickler (a signed serializer would stop it at the signature). Store-level attacks (sizes,
file modes, symlinks, temp files, replay across stores) are in
``test_checkpoint_security_stores.py``.
"""

from __future__ import annotations

import enum
import importlib
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import CancelMode
from agentkit._persist import persisted_names
from agentkit.checkpoint import PickleSerializer, UnsignedCheckpointWarning, _codec
from agentkit.errors import CheckpointError
from agentkit.schema import FunctionCall, Message, Role, ToolCall

pytestmark = pytest.mark.filterwarnings(
    "ignore::agentkit.checkpoint.UnsignedCheckpointWarning"
)

ROOT = Path(__file__).resolve().parents[1]
HEADER = b"AGKCKPT\x02\x00"  # version 2, unsigned


def reader() -> PickleSerializer:
    """Accepts unsigned checkpoints, so hostile payloads reach the unpickler."""
    return PickleSerializer(allow_unsigned=True)


def s(text: str) -> bytes:
    """SHORT_BINUNICODE ``text``."""
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


RESTORE = b"\x80\x05" + s("agentkit.checkpoint") + s("_restore") + b"\x93"


def restore_call(*parts: bytes) -> bytes:
    """Push ``_restore(*parts)`` (each part an opcode sequence pushing one value)."""
    return RESTORE + b"(" + b"".join(parts) + b"tR"


# -- the state that must never change -------------------------------------------------------


def all_persisted_types() -> dict[str, type]:
    for module in _codec._PERSISTED_MODULES:
        importlib.import_module(module)
    return persisted_names()


def snapshot() -> dict[str, Any]:
    """Everything a poisoned checkpoint could change: every persisted class's namespace and
    every member of every persisted enum (its value, its attributes, how it is looked up)."""
    state: dict[str, Any] = {}
    for name, cls in all_persisted_types().items():
        state[name] = {key: repr(value) for key, value in vars(cls).items()}
        if issubclass(cls, enum.Enum):
            for member in cls:
                state[f"{name}.{member.name}"] = (
                    member.value,
                    dict(vars(member)),
                    cls(member.value) is member,
                )
    state["Message.__setstate__"] = Message.__setstate__
    return state


@pytest.fixture
def untouched() -> Iterator[None]:
    """Fail the test if anything in agentkit's persisted types changed."""
    before = snapshot()
    yield
    assert snapshot() == before
    assert Role("user") is Role.USER and Role.USER.value == "user"
    assert CancelMode(CancelMode.IMMEDIATE.value) is CancelMode.IMMEDIATE


def refused(payload: bytes) -> CheckpointError:
    with pytest.raises(CheckpointError) as caught:
        reader().loads(HEADER + payload, checkpoint_id="x")
    return caught.value


# -- poisoning shared objects ---------------------------------------------------------------

ENUM_MEMBER = restore_call(s("Eagentkit.Role"), s("user"))
EVIL_STATE = b"}" + s("_value_") + s("system") + b"s"  # {"_value_": "system"}

POISONINGS = {
    # The original attack: Role("user") through the old module path, then BUILD on it.
    "module-path enum BUILD": b"\x80\x05c"
    + b"agentkit.schema\nRole\n"
    + s("user")
    + b"\x85R"
    + EVIL_STATE
    + b"b.",
    "module-path class BUILD": b"\x80\x05cagentkit.schema\nMessage\n}"
    + s("to_dict")
    + b"Nsb.",
    "enum member BUILD": ENUM_MEMBER + EVIL_STATE + b"b.",
    "enum member slot BUILD": ENUM_MEMBER + b"N" + EVIL_STATE + b"\x86b.",
    "class BUILD": restore_call(s("Tagentkit.Message")) + b"}" + s("to_dict") + b"Nsb.",
    "class SETITEM": restore_call(s("Tagentkit.Role")) + s("USER") + s("x") + b"s.",
    "enum member SETITEMS": ENUM_MEMBER + b"(" + s("_value_") + s("system") + b"u.",
    "enum member APPENDS": ENUM_MEMBER + b"(" + s("x") + b"e.",
    "enum member ADDITEMS": ENUM_MEMBER + b"(" + s("x") + b"\x90.",
    "restored class called": restore_call(s("Tagentkit.Role")) + s("user") + b"\x85R.",
    "enum built with new": restore_call(s("Nagentkit.Role"), s("user") + b"\x85", b"N", b"N", b"N")
    + b".",
    "enum built with state": restore_call(s("Sagentkit.Role"), s("_value_") + b"\x85", s("x") + b"\x85")
    + b".",
    "enum by call": restore_call(s("Cagentkit.CancelMode"), b")", EVIL_STATE, b"N", b"N") + b".",
    "obj opcode": b"\x80\x05(cagentkit.schema\nRole\n" + s("user") + b"o.",
    "inst opcode": b"\x80\x05(" + s("user") + b"iagentkit.schema\nRole\n.",
    "newobj": restore_call(s("Tagentkit.Role")) + s("user") + b"\x85\x81.",
    "persistent id": s("x") + b"Q.",
    "exception class swapped by state": restore_call(
        s("Cbuiltins.ValueError"),
        b")",
        b"}" + s("__class__") + restore_call(s("Tbuiltins.KeyError"))[2:] + b"s",
        b"N",
        b"N",
    )
    + b".",
    # POP right after MARK removes the mark, as in the C unpickler, so APPENDS has no mark.
    "pop of a mark": ENUM_MEMBER + b"(0](" + s("x") + b"e.",
    "dunder field in the short form": RESTORE
    + b"("
    + s("Sagentkit.FunctionCall")
    + s("__class__")
    + b"\x86"
    + restore_call(s("Tagentkit.ToolCall"))[2:]
    + b"tR.",

    "memo put": b"\x80\x05" + ENUM_MEMBER[2:] + b"q\x00" + EVIL_STATE + b"b.",
}


@pytest.mark.parametrize("payload", POISONINGS.values(), ids=POISONINGS.keys())
def test_poisoning_payloads_are_refused_and_change_nothing(
    payload: bytes, untouched: None
) -> None:
    refused(payload)


class Plain:
    """A user class without __setstate__: loading sets its __dict__ the way pickle does."""


@pytest.mark.parametrize("state", [b"}", b"N}"], ids=["dict state", "slot state"])
def test_dunder_attributes_are_never_set_from_data(state: bytes) -> None:
    name = f"{Plain.__module__}.Plain"
    evil = state + s("__class__") + restore_call(s(f"T{name}"))[2:] + b"s"
    if state == b"N}":
        evil += b"\x86"
    payload = restore_call(s(f"N{name}"), b")", evil, b"N", b"N") + b"."
    serializer = PickleSerializer(allow_unsigned=True, allowed_types=[Plain])
    assert type(serializer.loads(serializer.dumps(Plain(), checkpoint_id="x"), checkpoint_id="x")) is Plain
    with pytest.raises(CheckpointError, match="bad state"):
        serializer.loads(HEADER + payload, checkpoint_id="x")


def test_the_restore_function_is_inert_outside_loading(untouched: None) -> None:
    with pytest.raises(CheckpointError, match="only called while loading"):
        _codec._restore("Eagentkit.Role", "user")


def test_enum_members_are_looked_up_by_value_never_created() -> None:
    data = reader().dumps([Role.USER, CancelMode.IMMEDIATE], checkpoint_id="x")
    loaded = reader().loads(data, checkpoint_id="x")
    assert loaded[0] is Role.USER and loaded[1] is CancelMode.IMMEDIATE
    unknown = restore_call(s("Eagentkit.Role"), s("superuser")) + b"."
    assert "superuser" in str(refused(unknown))


# -- resource bombs, in a child process with a memory limit ---------------------------------

BOMBS = {
    "deque of a huge range": b"\x80\x05ccollections\ndeque\ncbuiltins\nrange\nJ\x00\x00\x00\x7f"
    + b"\x85RK\x01\x86R.",
    "list of a huge range": b"\x80\x05cbuiltins\nlist\ncbuiltins\nrange\n\x8a\x05\x00\xe8vH\x17"
    + b"\x85R\x85R.",
    "bytes(n)": b"\x80\x05cbuiltins\nbytes\n\x8a\x05\x00\xe8vH\x17\x85R.",
    "int from a huge decimal string": b"\x80\x02L" + b"9" * 2_000_000 + b"L\n.",
    "memo index bomb": b"\x80\x05Nr\xff\xff\xff\x0f.",
    "huge bytes length": b"\x80\x05\x8e" + (2**62).to_bytes(8, "little") + b"x.",
    "huge integer": b"\x80\x05\x8b" + (2**30).to_bytes(4, "little") + b"\x01" * 100 + b".",
    "many objects": b"\x80\x05" + b"]0" * 1_100_000 + b"N.",
    "deep lists": b"\x80\x05" + b"]" * 100_000 + b"a" * 99_999 + b".",
    "deep lists through the memo": b"\x80\x05]\x94"
    + b"".join(
        b"j" + i.to_bytes(4, "little") + b"]\x94a0" for i in range(0, 200_000)
    )
    + b"j\x00\x00\x00\x00.",
    "deep tuples": b"\x80\x05)" + b"\x85" * 100_000 + b".",
    # 200 000 distinct dict keys with one hash (k * (2**61 - 1)): quadratic to insert.
    "colliding dict keys": b"\x80\x05}("
    + b"".join(
        b"\x8a\x0b" + (k * (2**61 - 1)).to_bytes(11, "little", signed=True) + b"N"
        for k in range(1, 200_001)
    )
    + b"u.",
    "fraction from a huge exponent": restore_call(
        s("Vfractions.Fraction"), s("1e999999999") + b"\x85"
    )
    + b".",
}

BOMB_CHILD = """
import resource, sys, time, warnings
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: a bomb fails fast
warnings.simplefilter("ignore")
from agentkit.checkpoint import PickleSerializer
from agentkit.errors import CheckpointError
data = sys.stdin.buffer.read()
serializer = PickleSerializer(allow_unsigned=True)
started = time.perf_counter()
try:
    serializer.loads(data, checkpoint_id="bomb")
except CheckpointError as error:
    print(f"refused in {time.perf_counter() - started:.3f}s: {error}"[:300])
else:
    print("LOADED")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="uses resource limits")
@pytest.mark.parametrize("payload", BOMBS.values(), ids=BOMBS.keys())
def test_cpu_and_memory_bombs_are_refused(payload: bytes) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", BOMB_CHILD],
        input=HEADER + payload,
        capture_output=True,
        env=env,
        timeout=60,  # failure guard: each is refused in milliseconds
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.startswith(b"refused in "), result.stdout[-500:]


def test_a_long_integer_up_to_the_limit_still_loads() -> None:
    value = 2 ** (8 * 8000)
    assert reader().loads(reader().dumps(value, checkpoint_id="x"), checkpoint_id="x") == value


def test_a_reference_cycle_through_a_list_is_refused_on_load() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    data = reader().dumps(cycle, checkpoint_id="x")
    with pytest.raises(CheckpointError, match="reference cycle"):
        reader().loads(data, checkpoint_id="x")


def test_shared_references_survive_a_round_trip() -> None:
    shared = ["same"]
    message = Message(role=Role.USER, content="hi")
    value = {"a": shared, "b": shared, "m": [message, message]}
    loaded = reader().loads(reader().dumps(value, checkpoint_id="x"), checkpoint_id="x")
    assert loaded["a"] is loaded["b"]
    assert loaded["m"][0] is loaded["m"][1]


# -- a checkpoint signed with no configuration: every bit matters ---------------------------


def test_a_checkpoint_written_with_no_key_configured_is_signed_in_every_bit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(tmp_path / "agentkit" / "key"))
    serializer = PickleSerializer()
    value = {"approved": False, "role": Role.USER}
    data = serializer.dumps(value, checkpoint_id="run", namespace="file:/x")
    assert serializer.loads(data, checkpoint_id="run", namespace="file:/x") == value
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CheckpointError):
            serializer.loads(bytes(flipped), checkpoint_id="run", namespace="file:/x")


# -- fuzzing the unpickler ------------------------------------------------------------------

SAMPLES = [
    {"messages": [Message(role=Role.USER, content="pay 100 EUR")], "approved": False},
    [Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id="c", function=FunctionCall("f", "{}"))])],
    ({1, 2}, frozenset({"a"}), b"bytes", bytearray(b"ba"), 2**70, -1.5, None, True),
    [*CancelMode, *Role],
]
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UnsignedCheckpointWarning)
    VALID = [reader().dumps(sample, checkpoint_id="x")[len(HEADER) :] for sample in SAMPLES]
# Opcodes an attacker would splice in, and the restore call prefix.
HOSTILE = [
    b"b", b"R", b"\x81", b"\x92", b"o", b"i", b"c", b"\x93", b"Q", b"P", b"r\xff\xff\xff\x7f",
    b"q\x00", b"h\x00", b"s", b"u", b"a", b"e", b"\x90", b"(", b"0", b"1", b"2", b".",
    RESTORE[2:], ENUM_MEMBER[2:], EVIL_STATE,
]  # fmt: skip


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    """A valid payload, mutated: bytes flipped, hostile opcodes spliced in, cut or extended."""
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "splice", "cut", "random"]))
        position = draw(st.integers(0, len(data)))
        if action == "flip" and position < len(data):
            data[position] ^= draw(st.integers(1, 255))
        elif action == "splice":
            data[position:position] = draw(st.sampled_from(HOSTILE))
        elif action == "cut":
            del data[position : position + draw(st.integers(1, 8))]
        else:
            data[position:position] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.one_of(hostile_streams(), st.binary(max_size=200)))
def test_fuzzed_payloads_raise_only_checkpoint_error_and_change_nothing(payload: bytes) -> None:
    before = snapshot()
    try:
        reader().loads(HEADER + payload, checkpoint_id="x")
    except CheckpointError:
        pass
    assert snapshot() == before


def test_the_fuzz_corpus_loads_when_unmodified() -> None:
    for sample, payload in zip(SAMPLES, VALID, strict=True):
        assert reader().loads(HEADER + payload, checkpoint_id="x") == sample
