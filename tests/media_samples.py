"""Small, valid media files for the content-part tests (built here, nothing downloaded)."""

from __future__ import annotations

import struct
import zlib


def png(width: int = 1, height: int = 1, padding: int = 0) -> bytes:
    """A valid RGBA PNG; ``padding`` adds a private ancillary chunk of that many bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00\xff" * width for _ in range(height))
    extra = chunk(b"prVt", b"\x00" * padding) if padding else b""
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + extra
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf(text: str = "Hello") -> bytes:
    """A minimal PDF document."""
    return (
        b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\n% " + text.encode() + b"\ntrailer\n%%EOF\n"
    )


def wav(samples: int = 8) -> bytes:
    """A valid 8 kHz mono 16-bit WAV of silence."""
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data"
    body += struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def mp3() -> bytes:
    """The start of an MP3 file (an ID3 tag)."""
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" + b"\x00" * 32
