"""Every Python example in the documentation runs.

The fenced ```` ```python ```` blocks of ``README.md`` and of every ``docs/**/*.md`` page run in
order, one page at a time, in one namespace per page (a later block uses what an earlier one
defined, as a reader would) that is a module of its own, in a fresh working directory (with a link to
``samples/``), offline: ``OPENAI_BASE_URL`` points
at a :class:`~agentkit.testing.FakeOpenAIServer` of the page's own, which answers with the
replies a setup comment queued, else with a plain text answer.

The convention (``docs/contributing.md`` shows it to authors), in HTML comments that Markdown
renders as nothing, placed on the line(s) just before a block:

* ``<!-- doctest: skip (why) -->``: the next block does not run (it needs what the tests
  cannot give it: a real API key, a worker fleet, a user at a keyboard). Use it sparingly.
* ``<!-- doctest: setup`` then Python lines then ``-->``: hidden code that runs at that point,
  for example ``fake.queue(Reply(tool_calls=[call("get_weather", {"city": "Paris"})]))`` to
  script the model's next replies (``fake``, ``Reply`` and ``call`` are predefined).

Blocks in other languages (``text``, ``bash``, ``console``) and indented blocks never run.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentkit.testing import FakeOpenAIServer, Reply, call

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [REPO / "README.md", *(REPO / "docs").rglob("*.md")],
    key=lambda path: path.relative_to(REPO).as_posix(),
)
PAGES = [page for page in PAGES if "_build" not in page.parts]

DEFAULT_REPLY = "This is the documentation's fake model answering."

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$")
_SKIP = re.compile(r"^<!--\s*doctest:\s*skip\b.*-->\s*$")
_SETUP_START = re.compile(r"^<!--\s*doctest:\s*setup\s*$")
_MARKER = re.compile(r"^<!--\s*doctest:")


@dataclass(frozen=True)
class Block:
    """One piece of code a page runs, with the line it starts at."""

    line: int
    code: str
    hidden: bool  # a setup comment, not a shown block


def blocks(text: str) -> Iterator[Block]:
    """The code a page runs, in order: its Python blocks and setup comments, minus the
    skipped blocks."""
    lines = text.splitlines()
    index = 0
    skip_next = False
    while index < len(lines):
        line = lines[index]
        if _SKIP.match(line):
            skip_next = True
        elif _SETUP_START.match(line):
            end = _closing(lines, index, "-->")
            yield Block(index + 2, "\n".join(lines[index + 1 : end]), hidden=True)
            index = end
        elif _MARKER.search(line):
            raise ValueError(f"line {index + 1}: unknown doctest marker {line.strip()!r}")
        elif match := _FENCE.match(line):
            fence, language = match.groups()
            end = _closing(lines, index, fence)
            if language in ("python", "py") and not skip_next:
                yield Block(index + 2, "\n".join(lines[index + 1 : end]), hidden=False)
            elif skip_next and language not in ("python", "py"):
                raise ValueError(f"line {index + 1}: doctest: skip before a {language} block")
            skip_next = False
            index = end
        elif line.strip() and skip_next:
            raise ValueError(f"line {index + 1}: doctest: skip is not followed by a code block")
        index += 1


def _closing(lines: list[str], start: int, end_marker: str) -> int:
    for index in range(start + 1, len(lines)):
        if lines[index].strip() == end_marker:
            return index
    raise ValueError(f"line {start + 1}: {end_marker!r} never closes this block")


def _fake_model_handler(fake: _PageModel) -> Any:
    def handle(request: dict[str, Any]) -> Reply | str:
        return fake.next_reply()

    return handle


class _PageModel:
    """The replies of a page's fake server: those queued by setup comments, then the default."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: list[Reply | str] = []

    def queue(self, *replies: Reply | str) -> None:
        with self._lock:
            self._queued.extend(replies)

    def next_reply(self) -> Reply | str:
        with self._lock:
            return self._queued.pop(0) if self._queued else DEFAULT_REPLY


def test_the_block_parser_follows_the_convention() -> None:
    page = "\n".join(
        [
            "text",
            "```python",
            "a = 1",
            "```",
            "<!-- doctest: skip (needs a key) -->",
            "```python",
            "raise SystemExit",
            "```",
            "<!-- doctest: setup",
            "b = 2",
            "-->",
            "````python",
            "```",
            "c = a + b",
            "````",
            "```text",
            "not python",
            "```",
        ]
    )
    assert list(blocks(page)) == [
        Block(3, "a = 1", hidden=False),
        Block(10, "b = 2", hidden=True),
        Block(13, "```\nc = a + b", hidden=False),
    ]
    with pytest.raises(ValueError, match="not followed by a code block"):
        list(blocks("<!-- doctest: skip -->\nprose\n```python\nx\n```"))
    with pytest.raises(ValueError, match="unknown doctest marker"):
        list(blocks("<!-- doctest: skipp -->"))


def test_no_page_keeps_an_html_comment_but_the_doctest_markers() -> None:
    """A comment left for authors (a placeholder, a note) is invisible to readers and stale
    once the text it waited for is written: the only comments a page holds are markers."""
    left: list[str] = []
    for page in PAGES:
        fence: str | None = None
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            opened = _FENCE.match(line)
            if opened and (fence is None or line.strip() == fence):
                fence = opened.group(1) if fence is None else None
                continue
            if fence is None and line.lstrip().startswith("<!--") and not _MARKER.match(line):
                left.append(f"{page.relative_to(REPO).as_posix()}:{number}: {line.strip()}")
    assert left == []


def test_the_readme_says_in_one_list_what_agentkit_does_not_do_yet() -> None:
    """Users look for what is missing: one section of the README lists it, one bullet each
    (and nothing else in the docs repeats the list, so it is edited in one place)."""
    heading = "## What agentkit does not do yet"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.count(heading) == 1
    section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
    bullets = [line for line in section.splitlines() if line.startswith("- **")]
    assert bullets, "the section lists nothing: remove it once everything is there"
    for page in PAGES:
        if page.name != "README.md":
            assert heading.lstrip("# ") not in page.read_text(encoding="utf-8"), page


def _params() -> list[Any]:
    params: list[Any] = []
    for page in PAGES:
        name = page.relative_to(REPO).as_posix()
        params.append(pytest.param(page, id=name))
    return params


@pytest.mark.parametrize("page", _params())
def test_the_page_s_python_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = list(blocks(page.read_text(encoding="utf-8")))
    if not code:
        pytest.skip(f"{page.name} has no Python example")
    replies = _PageModel()
    (tmp_path / "samples").symlink_to(REPO / "samples")  # examples start the sample servers
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(_fake_model_handler(replies)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
        monkeypatch.delenv("AGENTKIT_MODEL", raising=False)
        name = page.relative_to(REPO).as_posix()
        # A module of its own, as a reader's script is: classes defined by the examples
        # resolve their annotations in it, and Flask(__name__) finds its folder.
        module = types.ModuleType("docs_example_" + re.sub(r"\W", "_", name))
        module.__file__ = str(tmp_path / "example.py")
        monkeypatch.setitem(sys.modules, module.__name__, module)
        namespace = module.__dict__
        namespace.update(fake=replies, Reply=Reply, call=call)
        for block in code:
            compiled = compile(
                "\n" * (block.line - 1) + block.code, f"{name} (line {block.line})", "exec"
            )
            try:
                exec(compiled, namespace)
            except Exception as error:
                kind = "setup comment" if block.hidden else "example"
                raise AssertionError(
                    f"the {kind} at {name}:{block.line} failed: {error!r}"
                ) from error
    assert os.getcwd() == str(tmp_path), "an example changed the working directory"
