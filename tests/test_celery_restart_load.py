"""The Celery load with a Redis restart, without a supervisor (issue 49; marker ``stress``).

2,000 runs on two real Celery workers (``--pool=threads``), a real redis-server (append-only)
stopped for 3 seconds when 40 % of the runs are submitted: no worker dies, every run ends
(none stays queued or running), and no tool runs twice. The load is
:mod:`benchmarks.celery_restart_load` (``python -m benchmarks.celery_restart_load`` prints the
same figures).
"""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("celery")
pytest.importorskip("redis")

from benchmarks.celery_restart_load import run_load


@pytest.mark.stress
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_two_thousand_runs_through_a_redis_restart() -> None:
    # A client that polls submits a run still queued a minute after the last submission
    # again with its key (kombu may lose a message a worker popped as Redis stopped).
    figures = run_load(2000, restart_at=0.4, outage=3.0, workers=2, guard=600.0,
                       resubmit_after=60.0)
    assert figures["workers_dead"] == 0, figures
    assert figures["unrecoverable_errors"] == 0, figures
    assert figures["runs_not_ended"] == 0, figures
    assert figures["tools_run_twice"] == 0, figures
    assert figures["statuses"] == {"completed": 2000}, figures
