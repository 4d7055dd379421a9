"""evaluate() in a real Jupyter kernel: the progress bar is one output updated in place, and
the report renders as an HTML table."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent

SETUP = """
import re
from agentkit import ChatModelAgent
from agentkit.evals import Case, Contains, evaluate
from agentkit.models import ScriptedChatModel

def reply(messages):
    a, b = map(int, re.findall(r"\\d+", messages[-1].content))
    return f"The sum is {a + b}."

agent = ChatModelAgent("calc", "adds", ScriptedChatModel(reply))
cases = [Case(f"What is {i} + 1?", checks=[Contains(f"{i + 1}" if i != 3 else "<x>")]) for i in range(6)]
"""

RUN = "report = evaluate(agent, cases, concurrency=2)\nreport"


def test_progress_and_report_render_in_a_notebook() -> None:
    notebook = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    notebook.cells = [
        nbformat.v4.new_code_cell(SETUP),  # type: ignore[no-untyped-call]
        nbformat.v4.new_code_cell(RUN),  # type: ignore[no-untyped-call]
    ]
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    outputs = notebook.cells[1]["outputs"]
    # No text on stderr: the bar is an HTML display, not terminal output.
    assert [o["output_type"] for o in outputs] == ["display_data", "execute_result"], outputs
    bar, result = outputs
    # The display was updated in place to its final state (nbclient applies the updates).
    assert "agentkit-eval-progress" in bar["data"]["text/html"]
    assert "<progress value='6' max='6'" in bar["data"]["text/html"]
    assert bar["data"]["text/plain"].startswith("eval: 6/6, 5 passed, 1 failed")
    page = result["data"]["text/html"]
    assert "agentkit-eval-report" in page and "5 of 6 passed" in page
    assert "Contains(&#x27;&lt;x&gt;&#x27;)" in page
