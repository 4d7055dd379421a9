"""Checkpoint serialization: pickle inside a versioned envelope, signed by default.

Envelope layout (format version 2)::

    b"AGKCKPT"        7 bytes   magic: "this is an agentkit checkpoint"
    version           1 byte    format version, 2
    flags             1 byte    bit 0 set: signed
    [key id]          8 bytes   only when signed: a fingerprint of the key (HMAC of a constant)
    [hmac]            32 bytes  only when signed: HMAC-SHA256, see below
    payload           ...       pickle protocol 5, as written by agentkit.checkpoint._codec

The HMAC covers ``magic + version + flags + key id``, then ``len + bytes`` (4-byte big-endian
length, UTF-8) of the store's **namespace** and of the checkpoint **id**, then the payload. A
signed checkpoint therefore cannot be altered, nor replayed under another id, nor copied into
another store (another Redis prefix, SQLite file or directory) with the same id.

Signed by default: without ``secret_key`` the key comes from ``AGENTKIT_CHECKPOINT_KEY``, else
from a key file generated once per user (see ``agentkit.checkpoint._keys``), so processes of
one machine share checkpoints with no set-up, and several machines share them once they are
given the same ``AGENTKIT_CHECKPOINT_KEY``. Keys rotate: given several keys, the first signs
and each verifies what it signed, found by the key id in the envelope (so a load computes one
HMAC, however many keys there are). Unsigned checkpoints are written and read only with
``allow_unsigned=True``, and each time with a
:class:`~agentkit.checkpoint.UnsignedCheckpointWarning`.

Why the payload cannot touch the process, signed or not (a stolen or leaked key must not
mean code execution): classes are written by stable name, and the C unpickler runs only
after ``agentkit.checkpoint._scan`` has checked the whole opcode stream, which admits
literals, plain containers, the memo and calls of one restore function, nothing else. That
function builds fresh instances of allowed classes and looks enum members up by value; no
``BUILD`` or ``setattr`` ever reaches a class, a function or an existing object, nothing can
allocate more than the payload describes, and depth and object count are capped. Checking the
stream is one linear pass in Python, then the C unpickler builds the value, calling the restore
function once per object; what each restore tag resolves to is kept by the serializer (see
``agentkit.checkpoint._decode``). A 50-message run saves and loads in about 1.1-1.2 ms of
CPU (0.2 ms ``dumps``, 0.9 ms ``loads``, of which 0.5 ms is the opcode check; plain pickle
takes 0.65 ms; ``benchmarks/bench_checkpoint.py``). The pure-Python ``pickle._Unpickler``
with its dispatch overridden would be simpler to restrict, but it alone takes 2 ms to load
the same run.

Format version 1 (the previous release: module paths, unsigned by default) is refused with a
message saying so: loading it would need a second, weaker reader.

``PickleSerializer``, ``Serializer``, ``UnsignedCheckpointWarning`` moved to
:mod:`agentkit.checkpoint`; their spellings here still work until agentkit 0.4, with a
:class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._serializer import (
    FLAG_SIGNED,
    FORMAT_VERSION,
    MAGIC,
    MAX_DEPTH,
    MAX_OBJECTS,
)

__all__ = [
    "FLAG_SIGNED",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_DEPTH",
    "MAX_OBJECTS",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "PickleSerializer": "agentkit.checkpoint.PickleSerializer",
            "Serializer": "agentkit.checkpoint.Serializer",
            "UnsignedCheckpointWarning": "agentkit.checkpoint.UnsignedCheckpointWarning",
        },
    )
