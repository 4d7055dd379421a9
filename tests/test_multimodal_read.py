"""MultiModalReader (Eino's): ``read_file`` over a LocalBackend or a SandboxBackend gives the
model images and PDFs as content parts (by their bytes, not their names), every other file as
numbered text, and refuses media over the cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit import ChatModelAgent, FilePart, ImagePart, Role, Runner, TextPart
from agentkit.backends import (
    FileTooLargeError,
    InMemoryBackend,
    LocalBackend,
    MultiModalReader,
    SandboxBackend,
    SandboxUnavailableError,
)
from agentkit.middlewares import FilesystemMiddleware
from agentkit.models import ScriptedChatModel
from agentkit.schema import Message
from agentkit.testing import call, calls_message
from tests.media_samples import pdf, png


def read_through_agent(backend: LocalBackend, path: str) -> Message:
    """The tool message the model gets for ``read_file(path)``."""
    model = ScriptedChatModel([calls_message(call("read_file", {"file_path": path})), "ok"])
    agent = ChatModelAgent("reader", "reads", model, middlewares=[FilesystemMiddleware(backend)])
    Runner(agent).invoke("go")
    (message,) = [m for m in model.calls[1].messages if m.role is Role.TOOL]
    return message


def test_an_image_reaches_the_model_as_an_image_part(tmp_path: Path) -> None:
    image = png(4, 4)
    (tmp_path / "chart.png").write_bytes(image)
    message = read_through_agent(LocalBackend(tmp_path), "chart.png")
    intro, part = message.parts
    assert intro == TextPart(f"File chart.png is an image (image/png, {len(image)} bytes):")
    assert part == ImagePart(image, media_type="image/png")


def test_a_pdf_reaches_the_model_as_a_file_part_with_its_name(tmp_path: Path) -> None:
    document = pdf("quarterly numbers")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "report.pdf").write_bytes(document)
    message = read_through_agent(LocalBackend(tmp_path), "docs/report.pdf")
    assert message.parts[1] == FilePart(document, media_type="application/pdf",
                                        filename="report.pdf")
    assert "is a document (application/pdf" in message.content


def test_the_type_comes_from_the_bytes_not_the_name(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes(png())
    (tmp_path / "photo.png").write_text("just text\n")
    backend = LocalBackend(tmp_path)
    assert isinstance(read_through_agent(backend, "notes.txt").parts[1], ImagePart)
    text = read_through_agent(backend, "photo.png")
    assert text.parts == () and text.content == "     1\tjust text"


def test_other_files_are_read_as_text_and_errors_are_told(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("one\ntwo\n")
    (tmp_path / "broken.png").write_bytes(png()[:-12])  # cut before its end chunk
    backend = LocalBackend(tmp_path)
    assert read_through_agent(backend, "a.md").content == "     1\tone\n     2\ttwo"
    assert read_through_agent(backend, "broken.png").content.startswith(
        "Error: 'broken.png' is a binary file")
    assert read_through_agent(backend, "../x.png").content.startswith("Error: path '../x.png'")


def test_media_over_the_cap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big.png").write_bytes(png(padding=5000))
    backend = LocalBackend(tmp_path)
    with pytest.raises(FileTooLargeError):
        backend.read_media("big.png", max_bytes=4096)
    assert backend.read_media("big.png", max_bytes=1 << 20) is not None
    small = LocalBackend(tmp_path, max_file_bytes=4096)  # the backend's own cap counts too
    message = read_through_agent(small, "big.png")
    assert message.parts == () and "big.png" in message.content
    assert message.content.startswith("Error:")


def test_which_backends_read_media(tmp_path: Path) -> None:
    assert isinstance(LocalBackend(tmp_path), MultiModalReader)
    assert not isinstance(InMemoryBackend(), MultiModalReader)
    try:
        sandbox = SandboxBackend(tmp_path)
    except SandboxUnavailableError:
        return
    (tmp_path / "s.png").write_bytes(png())
    assert isinstance(sandbox, MultiModalReader)
    assert isinstance(sandbox.read_media("s.png", max_bytes=1 << 20), ImagePart)
