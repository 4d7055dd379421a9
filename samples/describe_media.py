"""Describe an image, summarise a PDF: messages that carry media.

Offline by default: a scripted model plays the LLM and checks that it received the image and
the PDF as content parts (it reads their headers to answer). With ``OPENAI_API_KEY`` set it
asks a real vision-capable model (``AGENTKIT_MODEL``, default ``gpt-4o-mini``).

    python samples/describe_media.py                      # a generated chart and contract
    python samples/describe_media.py photo.jpg report.pdf # your own files
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    FilePart,
    ImagePart,
    Message,
    Role,
    Runner,
    print_events,
)
from agentkit.schema import ContentPart, describe_part


def sample_image(width: int = 64, height: int = 48) -> bytes:
    """A PNG bar chart (three bars: red, green, blue), drawn here so the sample needs no files."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    colours = [(220, 40, 40), (40, 170, 60), (40, 80, 220)]
    heights = [0.5, 0.9, 0.3]
    rows = []
    for y in range(height):
        row = bytearray(b"\x00")  # no filter
        for x in range(width):
            bar = x * 3 // width
            top = height - int(heights[bar] * height)
            inside = y >= top and x % (width // 3) > 2
            row += bytes(colours[bar] if inside else (255, 255, 255))
        rows.append(bytes(row))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def sample_pdf() -> bytes:
    """A one-page PDF contract, written here so the sample needs no files."""
    text = "Lease: flat 3B, 1 200 EUR a month, from 1 March, notice three months."
    stream = f"BT /F1 12 Tf 40 760 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def scripted_describer(messages: list[Message]) -> str:
    """Plays the LLM offline: answers from the parts it received, and fails without them."""
    question = messages[-1]
    images = [part for part in question.parts if isinstance(part, ImagePart)]
    files = [part for part in question.parts if isinstance(part, FilePart)]
    if not images and not files:
        raise AssertionError(f"the model received no media: {question!r}")
    answers = []
    for image in images:
        data = image.data or b""
        width, height = struct.unpack(">II", data[16:24])  # the PNG's IHDR
        answers.append(
            f"I see a {image.media_type} image of {width} x {height} pixels ({len(data)} "
            "bytes): a bar chart of three bars, the green one the highest."
        )
    for file in files:
        data = file.data or b""
        start = data.find(b"(") + 1
        summary = data[start : data.find(b")", start)].decode("latin-1")
        answers.append(f"{file.filename} ({file.media_type}, {len(data)} bytes) says: {summary}")
    return " ".join(answers)


def build_runner() -> Runner:
    """A runner of the describer agent (live or scripted)."""
    agent = ChatModelAgent(
        name="describer",
        description="describes images and summarises documents",
        model=make_model(scripted_describer),
        instruction="Describe images and summarise documents in two sentences at most.",
    )
    return Runner(agent)


def show(question: Sequence[str | ContentPart]) -> None:
    """Print what is sent: the text, and a line per part (never its bytes)."""
    for item in question:
        print(f"> {item}" if isinstance(item, str) else f">   {describe_part(item)}")


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Ask about an image, then about a PDF, and print both runs."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("image", nargs="?", type=Path, help="an image file (default: a chart)")
    parser.add_argument("pdf", nargs="?", type=Path, help="a PDF file (default: a contract)")
    args = parser.parse_args(argv)
    banner("describe_media")
    image = ImagePart(args.image.read_bytes() if args.image else sample_image())
    pdf = FilePart(
        args.pdf.read_bytes() if args.pdf else sample_pdf(),
        filename=args.pdf.name if args.pdf else "lease.pdf",
    )
    runner = build_runner()
    events: list[AgentEvent] = []
    questions: list[list[str | ContentPart]] = [
        ["Describe this image.", image],
        ["Summarise this PDF.", pdf],
    ]
    for question in questions:
        show(question)
        ran = print_events(runner.query(question))
        if any(event.err is not None for event in ran):
            raise SystemExit(1)
        events += ran
    answers = [e for e in events if e.output and e.output.message_output]
    assert all(e.output.message_output.role is Role.ASSISTANT for e in answers)  # type: ignore[union-attr]
    return events


if __name__ == "__main__":
    main()
