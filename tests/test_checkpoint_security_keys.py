"""Checkpoint keys: which key signs, what each key mismatch says, ids and namespaces bound.

The key sources (argument, ``AGENTKIT_CHECKPOINT_KEY``, the per-user key file) and the
unsigned mode; the envelope and refusals are in ``test_checkpoint_serializer.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.checkpoint import PickleSerializer, UnsignedCheckpointWarning
from agentkit.errors import CheckpointError
from tests.test_checkpoint_serializer import KEY, OTHER_KEY, Order, serializer_for, unsigned

pytestmark = pytest.mark.filterwarnings(
    "ignore::agentkit.checkpoint.UnsignedCheckpointWarning"
)


@pytest.mark.parametrize(
    ("writer_key", "reader_key", "error"),
    [
        (None, None, None),
        (KEY, KEY, None),
        (None, KEY, "is not signed; refusing to load it"),
        (KEY, None, "is signed; this serializer has no key"),
        (KEY, OTHER_KEY, "signed with another key .* set the same AGENTKIT_CHECKPOINT_KEY"),
    ],
)
def test_key_matrix(writer_key: bytes | None, reader_key: bytes | None, error: str | None) -> None:
    data = serializer_for(writer_key).dumps([1, "two"], checkpoint_id="run")
    reader = serializer_for(reader_key) if reader_key is not None else unsigned()
    if error is None:
        assert reader.loads(data, checkpoint_id="run") == [1, "two"]
    else:
        with pytest.raises(CheckpointError, match=error):
            reader.loads(data, checkpoint_id="run")


def test_a_signed_checkpoint_replayed_under_another_id_is_refused() -> None:
    serializer = PickleSerializer(KEY)
    data = serializer.dumps({"approved": False}, checkpoint_id="alice")
    with pytest.raises(CheckpointError, match="saved under another checkpoint id"):
        serializer.loads(data, checkpoint_id="bob")


def test_a_signed_checkpoint_replayed_in_another_namespace_is_refused() -> None:
    serializer = PickleSerializer(KEY)
    data = serializer.dumps({"approved": False}, checkpoint_id="42", namespace="redis:tenantA:")
    assert serializer.loads(data, checkpoint_id="42", namespace="redis:tenantA:") == {
        "approved": False
    }
    for namespace in ("redis:tenantB:", "", "redis:tenantA"):
        with pytest.raises(CheckpointError, match="in another store"):
            serializer.loads(data, checkpoint_id="42", namespace=namespace)


def test_namespace_and_id_cannot_be_shifted_into_each_other() -> None:
    serializer = PickleSerializer(KEY)
    data = serializer.dumps(1, checkpoint_id="b:c", namespace="a:")
    with pytest.raises(CheckpointError, match="signature check"):
        serializer.loads(data, checkpoint_id="c", namespace="a:b:")


def test_unsigned_checkpoints_are_not_bound_to_their_id() -> None:
    serializer = unsigned()
    data = serializer.dumps("value", checkpoint_id="alice")
    assert serializer.loads(data, checkpoint_id="bob") == "value"


def test_unsigned_checkpoints_warn_when_written_and_read() -> None:
    with pytest.warns(UnsignedCheckpointWarning, match="writes unsigned checkpoints"):
        serializer = PickleSerializer(allow_unsigned=True)
    assert not serializer.signed
    with pytest.warns(UnsignedCheckpointWarning, match="written unsigned"):
        data = serializer.dumps(1, checkpoint_id="x")
    with pytest.warns(UnsignedCheckpointWarning, match="loaded only because allow_unsigned"):
        assert serializer.loads(data, checkpoint_id="x") == 1
    # With a key, allow_unsigned still signs what it writes but reads old unsigned ones.
    migrating = PickleSerializer(KEY, allow_unsigned=True)
    assert migrating.signed
    with pytest.warns(UnsignedCheckpointWarning):
        assert migrating.loads(data, checkpoint_id="x") == 1


def test_from_env_is_keyed_by_agentkit_checkpoint_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "s3cret-of-16-bytes-or-more")
    keyed = PickleSerializer.from_env(allowed_types=[Order])
    assert keyed.signed
    assert keyed.allowed_types == frozenset({Order})
    data = keyed.dumps(Order(1), checkpoint_id="x")
    reader = PickleSerializer(b"s3cret-of-16-bytes-or-more", [Order])
    assert reader.loads(data, checkpoint_id="x") == Order(1)
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "short")
    with pytest.raises(CheckpointError, match="AGENTKIT_CHECKPOINT_KEY is 5 bytes long"):
        PickleSerializer.from_env()


def test_without_a_key_the_key_file_signs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(tmp_path / "cfg" / "checkpoint.key"))
    first = PickleSerializer.from_env()
    assert first.signed
    data = first.dumps([1], checkpoint_id="x")
    assert data[8] == 1  # the signed flag
    assert PickleSerializer().loads(data, checkpoint_id="x") == [1]
    key_text = (tmp_path / "cfg" / "checkpoint.key").read_bytes().strip()
    assert PickleSerializer(key_text).loads(data, checkpoint_id="x") == [1]
