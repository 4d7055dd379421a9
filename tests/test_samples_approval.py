"""samples/approval.py: interrupt, answer, resume in a new process from the file store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.samples_support import run_sample


def run(args: list[str], store: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_sample("approval.py", "--store", str(store), *args, stdin=stdin)


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["--approve", "yes"], None, "Done: paid 120.00 EUR to ACME Corp"),
        (["--approve", "no"], None, "The payment was not made: you declined it."),
        ([], "yes\n", "Done: paid 120.00 EUR to ACME Corp"),
    ],
)
def test_approval_resumes_in_a_new_process(args: list[str], stdin: str | None, expected: str, tmp_path: Path) -> None:
    result = run(args, tmp_path, stdin)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Pay 120.00 EUR to ACME Corp? (yes/no)" in out
    pids = [line.split("]")[0] for line in out.splitlines() if line.startswith("[process")]
    assert len(set(pids)) == 2, out  # the resume ran in another process
    assert expected in out
    assert list(tmp_path.iterdir())  # the checkpoint is in the file store
