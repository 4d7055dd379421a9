"""samples/notebook.ipynb runs in a real Jupyter kernel (its event loop is running); the live
display, events, messages and interrupts render as HTML with a plain-text fallback."""

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
    # nbformat.read has no annotations.
    notebook = nbformat.read(  # type: ignore[no-untyped-call]
        ROOT / "samples" / "notebook.ipynb", as_version=4
    )
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    outputs = [cell.get("outputs", []) for cell in notebook.cells if cell.cell_type == "code"]
    # The live display: one output, updated in place, finished (no "running" left).
    (shown,) = outputs[1]
    assert shown["output_type"] == "display_data"
    html, text = shown["data"]["text/html"], shown["data"]["text/plain"]
    assert "get_weather returned: sunny, 21°C" in html and "agentkit-transfer" not in html
    assert "In Paris it is sunny, 21°C, and 17 * 23 = 391." in html
    assert "running" not in text
    assert text.splitlines()[-1] == "assistant: In Paris it is sunny, 21°C, and 17 * 23 = 391."
    assert 'assistant calls calculate({"expression": "17 * 23"})' in text
    answer = outputs[2][0]["data"]["text/plain"]
    assert answer == "'In Paris it is sunny, 21°C, and 17 * 23 = 391.'"
    assert "('assistant', 'assistant')" in outputs[3][0]["data"]["text/plain"]
    event = outputs[4][0]["data"]
    assert event["text/plain"].startswith("AgentEvent(")
    assert "Let me check the weather and do the math." in event["text/html"]
    live_interrupt, interrupt = outputs[5]
    assert "waiting for input: Pay 120.00 EUR to ACME Corp? (yes/no)" in live_interrupt["data"]["text/plain"]
    assert interrupt["data"]["text/plain"].startswith("InterruptInfo(")
    assert "agentkit-interrupt" in interrupt["data"]["text/html"]
    assert "Pay 120.00 EUR to ACME Corp? (yes/no)" in interrupt["data"]["text/html"]
    message = outputs[6][-1]["data"]
    assert "Done: paid 120.00 EUR to ACME Corp" in message["text/html"]
    # A message with an image shows it inline; its text form shows a size, never the bytes.
    question = outputs[7][0]["data"]
    assert '<img src="data:image/png;base64,iVBORw0KGgo' in question["text/html"]
    assert "Describe this chart." in question["text/html"]
    assert "ImagePart(data=<" in question["text/plain"] and "base64" not in question["text/plain"]
    described = outputs[8][-1]["data"]["text/plain"]
    assert "image/png image of 64 x 48 pixels" in described
