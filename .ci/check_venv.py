"""Check that this Python is the fresh virtual environment ``.ci/run`` made, and sees nothing else.

``python .ci/check_venv.py VENV`` exits with status 1, naming what is wrong, when ``sys.prefix`` is
not ``VENV``, or when an entry of ``sys.path`` (``PYTHONPATH``, a ``.pth`` file, the user's or the
machine's site-packages) lies outside the venv, the interpreter's standard library and this
repository (the editable install), or when the ``python3`` Jupyter kernel the notebook tests start
is not the venv's. Imports come from ``sys.path`` only, so whatever the tests or the
documentation build import was installed by the README's command in that venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def problems(venv: Path) -> list[str]:
    """What makes this interpreter other than an isolated ``venv``."""
    found: list[str] = []
    prefix = Path(sys.prefix).resolve()
    if prefix != venv.resolve():
        found.append(f"sys.prefix is {prefix}, not the venv {venv}")
    if sys.prefix == sys.base_prefix:
        found.append(f"{sys.executable} is not a virtual environment's Python")
    base = Path(sys.base_prefix).resolve()
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if _within(path, prefix) or _within(path, REPO):
            continue
        packages = {"site-packages", "dist-packages"} & set(path.parts)
        if _within(path, base) and not packages:
            continue  # the standard library
        found.append(f"sys.path has {entry!r}, outside the venv")
    found.extend(_kernel_problems(prefix))
    return found


def _kernel_problems(prefix: Path) -> list[str]:
    """The notebook tests run the ``python3`` Jupyter kernel: its spec must be the venv's, not
    one in the user's or the machine's Jupyter folders that starts another Python."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        return []  # a venv without the test extra runs no notebook
    spec = KernelSpecManager().find_kernel_specs().get("python3")
    if spec is not None and not _within(Path(spec).resolve(), prefix):
        return [f"the python3 Jupyter kernel is {spec}, outside the venv"]
    return []


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python .ci/check_venv.py VENV", file=sys.stderr)
        return 2
    found = problems(Path(argv[1]))
    for problem in found:
        print(f"check_venv: {problem}", file=sys.stderr)
    if not found:
        print(f"check_venv: {sys.prefix} sees only its own packages")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
