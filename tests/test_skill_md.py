"""``SKILL.md`` and ``llms.txt``: what teaches an AI coding assistant to write agentkit code.

Every Python block of ``SKILL.md`` runs, in order, in one namespace (a later block uses what an
earlier one defined), offline: no block may need a network, a key or a marker to skip it, so
what the file teaches is code that works. ``llms.txt`` follows the llms.txt format and links
only to files that exist.
"""

from __future__ import annotations

import re
import socket
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SKILL = REPO / "SKILL.md"
LLMS = REPO / "llms.txt"

_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def _python_blocks(text: str) -> list[tuple[int, str]]:
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def test_skill_md_has_the_front_matter_of_a_skill() -> None:
    text = SKILL.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "SKILL.md starts with YAML front matter"
    fields = dict(line.split(": ", 1) for line in match.group(1).splitlines())
    assert fields["name"] == "agentkit"
    assert 50 < len(fields["description"]) <= 1024


def test_every_code_block_of_skill_md_runs_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = SKILL.read_text(encoding="utf-8")
    blocks = _python_blocks(text)
    assert len(blocks) >= 8
    assert "doctest" not in text, "every block of SKILL.md runs: no skip markers"
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    def no_network(*args: object, **kwargs: object) -> socket.socket:
        raise AssertionError("a SKILL.md example opened a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    module = types.ModuleType("skill_md_examples")
    module.__file__ = str(tmp_path / "skill_md.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for line, code in blocks:
        compiled = compile("\n" * (line - 1) + code, f"SKILL.md (line {line})", "exec")
        try:
            exec(compiled, module.__dict__)
        except Exception as error:
            raise AssertionError(f"the example at SKILL.md:{line} failed: {error!r}") from error


def test_llms_txt_follows_the_format_and_links_to_files_that_exist() -> None:
    text = LLMS.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# agentkit"
    assert any(line.startswith("> ") for line in lines[1:4]), "a summary quote follows the title"
    links = re.findall(r"\[[^\]]+\]\(([^)]+)\)", text)
    assert len(links) >= 10
    for link in links:
        assert not link.startswith("http"), f"llms.txt links within the repository: {link}"
        assert (REPO / link.split("#", 1)[0]).is_file(), f"llms.txt links to a missing {link}"
    assert "(SKILL.md)" in text
