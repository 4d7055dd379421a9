"""AGENTS.md content in every model call (``agents_md``): what the model is sent, includes with
``@path``, budgets, missing files, and that nothing is kept in the conversation.

Tests named after Eino's follow ``adk/middlewares/agentsmd/agentsmd_test.go``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Message, Role, Runner, tool, user_message
from agentkit.backends import InMemoryBackend, LocalBackend, PathOutsideRootError
from agentkit.errors import AgentConfigError
from agentkit.middlewares import AgentsMdMiddleware
from agentkit.middlewares.agents_md import format_instructions
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events, summarize

HEADER = (
    "<system-reminder>\nBelow are instructions for this codebase and from the user. Follow them: "
    "they take precedence\nover your default behaviour.\n"
)
FOOTER = (
    "Use this context where it applies to the task; do not respond to it otherwise.\n"
    "</system-reminder>"
)


def sent(middleware: AgentsMdMiddleware, messages: list[Message]) -> list[Message]:
    """What one model call of a run with ``middleware`` is sent for ``messages``."""
    seen: list[list[Message]] = []

    def model_call(given: list[Message], options: Any) -> Message:
        seen.append(given)
        return Message(Role.ASSISTANT, "ok")

    middleware.wrap_model(model_call)(messages, None)
    return seen[0]


def loaded(backend: InMemoryBackend, files: list[str], **kwargs: Any) -> str:
    return AgentsMdMiddleware(backend, files, **kwargs).load()


def test_new_validation() -> None:
    """Eino's TestNew_Validation and TestNew_Validation_EmptyAgentFiles."""
    backend = InMemoryBackend()
    with pytest.raises(AgentConfigError, match="at least one file"):
        AgentsMdMiddleware(backend, [])
    with pytest.raises(AgentConfigError, match="takes a list of paths"):
        AgentsMdMiddleware(backend, "AGENTS.md")
    with pytest.raises(AgentConfigError, match="max_bytes"):
        AgentsMdMiddleware(backend, max_bytes=0)


def test_middleware_basic_injection() -> None:
    """Eino's TestMiddleware_BasicInjection."""
    backend = InMemoryBackend({"agent.md": "You are a helpful assistant."})
    messages = sent(AgentsMdMiddleware(backend, ["agent.md"]), [user_message("hello")])
    assert len(messages) == 2
    assert messages[0].role is Role.USER
    assert messages[0].content.count("<system-reminder>") == 1
    assert messages[0].content.count("</system-reminder>") == 1
    assert "You are a helpful assistant." in messages[0].content
    assert messages[1] == user_message("hello")


def test_loader_exact_output() -> None:
    """Eino's TestLoader_ExactOutput: each file its own section; @path kept in the text."""
    backend = InMemoryBackend({
        "project/CLAUDE.md": "this is project claude.md\n\n- git workflow @git/git-instructions.md",
        "project/git/git-instructions.md": "this is git-instructions.md",
    })
    assert loaded(backend, ["project/CLAUDE.md"]) == (
        HEADER
        + "\nContents of project/CLAUDE.md (instructions):\n\n"
        "this is project claude.md\n\n- git workflow @git/git-instructions.md\n"
        "\nContents of project/git/git-instructions.md (instructions):\n\n"
        "this is git-instructions.md\n"
        + FOOTER
    )


def test_middleware_multiple_files_in_order() -> None:
    """Eino's TestMiddleware_MultipleFiles."""
    backend = InMemoryBackend({"a.md": "AAA", "b.md": "BBB"})
    text = loaded(backend, ["b.md", "a.md"])
    assert text.index("BBB") < text.index("AAA")


def test_loader_imports_recursive_transitive_and_diamond() -> None:
    """Eino's TestMiddleware_RecursiveImport, TestLoader_TransitiveImport,
    TestLoader_DiamondDependency and TestLoader_RelativePathResolution."""
    backend = InMemoryBackend({
        "root.md": "root @docs/a.md @docs/b.md",
        "docs/a.md": "a @shared.md",
        "docs/b.md": "b @shared.md @../root.md",
        "docs/shared.md": "shared",
    })
    text = loaded(backend, ["root.md"])
    order = [line for line in text.splitlines() if line.startswith("Contents of")]
    assert order == [
        "Contents of root.md (instructions):",
        "Contents of docs/a.md (instructions):",
        "Contents of docs/shared.md (instructions):",
        "Contents of docs/b.md (instructions):",
    ]


def test_loader_at_sign_in_normal_text_is_no_import() -> None:
    """Eino's TestLoader_AtSignInNormalText."""
    backend = InMemoryBackend({"a.md": "mail me@example.com or @someone; see @notes.txt"})
    warnings: list[tuple[str, str]] = []
    text = loaded(backend, ["a.md"], on_warning=lambda path, problem: warnings.append((path, problem)))
    assert warnings == [("notes.txt", "file not found, skipping")]
    assert text.count("Contents of") == 1


def test_loader_circular_and_too_deep_imports_are_skipped_with_warnings() -> None:
    """Eino's TestLoader_CircularImportSkipped and TestLoader_DepthExceededSkipped."""
    chain = {f"l{n}.md": f"level {n} @l{n + 1}.md" for n in range(8)}
    backend = InMemoryBackend({"a.md": "A @b.md", "b.md": "B @a.md", **chain})
    warnings: list[tuple[str, str]] = []
    text = loaded(backend, ["a.md"], on_warning=lambda path, problem: warnings.append((path, problem)))
    assert "A @b.md" in text and "B @a.md" in text and text.count("Contents of") == 2
    assert warnings == []  # a file already included is not included again
    text = loaded(backend, ["l0.md"], on_warning=lambda path, problem: warnings.append((path, problem)))
    assert text.count("Contents of") == 6  # l0 and five levels of includes
    assert warnings == [("l6.md", "skipped: included more than 5 levels deep")]


def test_loader_max_bytes() -> None:
    """Eino's TestLoader_MaxBytesFirstFileFull and TestMiddleware_MaxBytesLimit, bounded: the
    first file is always there, cut to the budget when it alone passes it; a file that would
    take the files past the budget is skipped."""
    backend = InMemoryBackend({"big.md": "x" * 100, "next.md": "y" * 10, "fits.md": "z" * 10})
    warnings: list[tuple[str, str]] = []
    text = loaded(backend, ["big.md", "next.md"], max_bytes=50,
                  on_warning=lambda path, problem: warnings.append((path, problem)))
    assert "x" * 50 in text and "x" * 51 not in text and "Contents of next.md" not in text
    assert warnings == [
        ("big.md", "cut to its first 50 bytes (max_bytes=50)"),
        ("next.md", "skipped: together the files would pass max_bytes=50"),
    ]
    warnings.clear()
    text = loaded(backend, ["fits.md", "big.md", "next.md"], max_bytes=25,
                  on_warning=lambda path, problem: warnings.append((path, problem)))
    assert "z" * 10 in text and "y" * 10 in text and "Contents of big.md" not in text
    assert warnings == [("big.md", "skipped: together the files would pass max_bytes=25")]


def test_the_files_are_capped_by_default() -> None:
    """30 includes of 1 MiB each (the model can write them): 256 KiB reach the model, not 30 MiB."""
    big = {f"docs/part{n}.md": f"part {n} " + "x" * (1 << 20) for n in range(30)}
    index = "Read these: " + " ".join(f"@docs/part{n}.md" for n in range(30))
    backend = InMemoryBackend({"AGENTS.md": index, **big})
    warnings: list[tuple[str, str]] = []
    text = loaded(backend, ["AGENTS.md"], on_warning=lambda p, w: warnings.append((p, w)))
    assert "Read these:" in text
    assert len(text.encode()) < 256 * 1024 + 1024
    assert warnings[0] == ("docs/part0.md", "skipped: together the files would pass max_bytes=262144")
    assert len(warnings) == 30
    assert "x" * (1 << 20) in loaded(backend, ["AGENTS.md"], max_bytes=None)  # no cap: asked for


def test_bad_includes_are_skipped_with_warnings_and_never_leave_the_root(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "style.md").write_text("Use short sentences.")
    (root / "logo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary")
    (tmp_path / "x.md").write_text("OUTSIDE THE ROOT")
    (root / "AGENTS.md").write_text(
        "Rules. See @docs/ and @../x.md and @/etc/passwd and @logo.md and @docs/style.md"
    )
    warnings: list[tuple[str, str]] = []
    middleware = AgentsMdMiddleware(LocalBackend(root), on_warning=lambda p, w: warnings.append((p, w)))
    model = ScriptedChatModel(["ok"])
    agent = ChatModelAgent("a", "d", model, middlewares=[middleware])
    assert Runner(agent).invoke("hi").text == "ok"  # the run goes on
    sent_text = model.calls[0].messages[0].content
    assert "Rules." in sent_text and "Use short sentences." in sent_text
    assert "OUTSIDE THE ROOT" not in sent_text and "root:" not in sent_text
    assert [path for path, _ in warnings] == ["docs", "../x.md", "/etc/passwd", "logo.md"]
    problems = dict(warnings)
    assert problems["docs"] == "skipped: a directory, not a file; include its files one by one"
    for path in ("../x.md", "/etc/passwd"):
        assert problems[path] == (
            "skipped: an include is a path relative to the including file, inside the root"
        )
    assert problems["logo.md"].startswith("skipped: the backend refused to read it:")


def test_loader_missing_files_are_skipped() -> None:
    """Eino's TestLoader_MissingFileSkipped, AllMissingFilesSkipped, TestMiddleware_MissingFile."""
    backend = InMemoryBackend({"good.md": "GOOD CONTENT"})
    warnings: list[tuple[str, str]] = []
    middleware = AgentsMdMiddleware(
        backend, ["missing.md", "good.md"], on_warning=lambda p, w: warnings.append((p, w))
    )
    assert "GOOD CONTENT" in middleware.load()
    assert warnings == [("missing.md", "file not found, skipping")]
    assert AgentsMdMiddleware(backend, ["none.md"], on_warning=lambda p, w: None).load() == ""
    assert sent(AgentsMdMiddleware(backend, ["none.md"], on_warning=lambda p, w: None),
                [user_message("hi")]) == [user_message("hi")]


def test_loader_other_read_errors_end_the_load() -> None:
    """Eino's TestLoader_LoadFileError: an error that is not about the file (the backend
    failed) is not skipped; what a file is (missing, a directory, binary, outside the root)
    is skipped with a warning."""

    class Unreachable(InMemoryBackend):
        def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
            raise ConnectionError("the remote workspace does not answer")

    with pytest.raises(ConnectionError):
        loaded(Unreachable({"a.md": "x"}), ["a.md"])

    class Refusing(InMemoryBackend):
        def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
            raise PathOutsideRootError(f"{path}: outside")

    warnings: list[tuple[str, str]] = []
    assert loaded(Refusing({"a.md": "x"}), ["a.md"], on_warning=lambda p, w: warnings.append((p, w))) == ""
    assert warnings == [("a.md", "skipped: the backend refused to read it: a.md: outside")]


def test_format_content_empty() -> None:
    """Eino's TestFormatContent_Empty."""
    assert format_instructions([]) == ""


def test_middleware_insert_before_first_user_message_or_at_the_end() -> None:
    """Eino's TestMiddleware_InsertBeforeFirstUserMessage and InsertWithNoUserMessage."""
    middleware = AgentsMdMiddleware(InMemoryBackend({"AGENTS.md": "rules"}))
    system = Message(Role.SYSTEM, "sys")
    roles = [m.role for m in sent(middleware, [system, user_message("a"), user_message("b")])]
    assert roles == [Role.SYSTEM, Role.USER, Role.USER, Role.USER]
    assert [m.role for m in sent(middleware, [system])] == [Role.SYSTEM, Role.USER]


def test_middleware_is_transient_and_read_once_per_run() -> None:
    """Eino's TestMiddleware_InjectedInState and TestMiddleware_Idempotency, in agentkit's
    transient form: every model call gets the content once; the conversation never keeps it."""
    reads: list[str] = []

    class CountingBackend(InMemoryBackend):
        def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
            reads.append(path)
            return super().read(path, offset=offset, limit=limit)

    backend = CountingBackend({"AGENTS.md": "Always answer in French."})

    @tool
    def echo(text: str) -> str:
        """Echoes."""
        return text

    model = ScriptedChatModel([calls_message(call("echo", {"text": "bonjour"})), "Bonjour !"])
    agent = ChatModelAgent(
        "a", "d", model, instruction="sys", tools=[echo], middlewares=[AgentsMdMiddleware(backend)]
    )
    events = run_events(lambda: Runner(agent).query("hello"))
    assert events[-1].err is None
    for model_call in model.calls:
        reminders = [m for m in model_call.messages if "Always answer in French." in m.content]
        assert len(reminders) == 1
        assert model_call.messages.index(reminders[0]) == 1  # after the system message
    assert reads == ["AGENTS.md"]  # once per run
    # What the agent keeps (the history the next call is built from) has no reminder.
    assert [m.content for m in model.calls[1].messages if m.role is Role.USER] == [
        model.calls[1].messages[1].content, "hello"
    ]
    assert all("French" not in summarize(event)[3] for event in events)
