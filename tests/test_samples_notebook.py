"""samples/notebook.ipynb runs in a real Jupyter kernel (its event loop is running)."""

from __future__ import annotations

import os
from pathlib import Path

import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_notebook_runs_in_a_real_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AGENTKIT_")):
            monkeypatch.delenv(name)
    notebook = nbformat.read(ROOT / "samples" / "notebook.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    outputs = [cell.get("outputs", []) for cell in notebook.cells if cell.cell_type == "code"]
    printed = "".join(o.get("text", "") for cell in outputs for o in cell if o.get("name") == "stdout")
    assert "get_weather returned: sunny, 21°C" in printed
    answer = outputs[2][0]["data"]["text/plain"]
    assert answer == "'In Paris it is sunny, 21°C, and 17 * 23 = 391.'"
    assert "('assistant', 'assistant')" in outputs[3][0]["data"]["text/plain"]
