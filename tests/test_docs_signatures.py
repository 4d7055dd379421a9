"""The API reference shows attrs classes' signatures as a user writes them.

attrs generates each class's ``__init__``; its source reads ``attr_dict['max_retries'].default``
and ``NOTHING`` (a factory), which autodoc would print (``docs/_ext/attrs_signatures.py`` says
why). Here Sphinx builds, as text, the signature of every public attrs class with the autodoc
settings of ``docs/conf.py`` and the documentation's extension, and the signatures are read back.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def _autodoc_settings() -> str:
    """docs/conf.py's ``autodoc_*`` settings, as lines of a conf.py."""
    tree = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    lines = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.startswith("autodoc_")
        ):
            lines.append(ast.unparse(node))
    return "\n".join(lines)


def _public_attrs_classes() -> list[str]:
    from tests.test_public_modules import PUBLIC

    found: dict[int, str] = {}
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and attrs.has(value):
                found.setdefault(id(value), f"{module_name}.{name}")
    return sorted(found.values())


@pytest.fixture(scope="module")
def signatures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``dotted name -> its signature line`` in the text Sphinx builds."""
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("out")
    classes = _public_attrs_classes()
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(REPO)!r}, {str(DOCS / '_ext')!r}]\n"
        'extensions = ["sphinx.ext.autodoc", "attrs_signatures"]\n'
        "add_module_names = True\n" + _autodoc_settings() + "\n",
        encoding="utf-8",
    )
    (src / "index.rst").write_text(
        "Signatures\n==========\n\n"
        + "".join(f".. autoclass:: {name}\n   :no-index:\n\n" for name in classes),
        encoding="utf-8",
    )
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "text", str(src), str(out)],
        check=True,
        cwd=REPO,
        timeout=300,
        capture_output=True,
    )
    text = (out / "index.txt").read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("class "):
            name = line[len("class ") :].partition("(")[0]
            found[name] = line
    missing = [name for name in classes if name not in found]
    assert not missing, f"no signature built for {missing}"
    return found


def test_no_signature_shows_attrs_generated_source(signatures: dict[str, str]) -> None:
    leaks = [line for line in signatures.values() if "attr_dict" in line or "NOTHING" in line]
    assert not leaks, "\n".join(leaks)
    assert len(signatures) > 50  # the check read the public attrs classes


def test_defaults_read_as_the_class_writes_them(signatures: dict[str, str]) -> None:
    assert "(max_retries: int = 2," in signatures["agentkit.ModelRetryConfig"]
    assert "backoff: Callable[[int], float] = default_backoff," in (
        signatures["agentkit.ModelRetryConfig"]
    )
    message = signatures["agentkit.Message"]
    assert "content: str = ''" in message
    assert "tool_calls: Iterable[ToolCall] = ()" in message  # the converter's type: any iterable
    assert "extra: Mapping[str, Any] = {}" in message  # NO_EXTRA, the shared read-only {}
    # ToolCall's __init__ is written out (a frozen class's attrs __init__ costs more)
    assert "function: FunctionCall | None = None" in signatures["agentkit.ToolCall"]
