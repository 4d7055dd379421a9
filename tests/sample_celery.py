"""The sample app (``samples/flask_app``) on a real Celery worker and Redis, for tests.

:func:`sample_on_celery` starts a worker of ``flask_app.tasks`` on a queue of its own, points
this process's copy of ``flask_app.tasks`` at the same Redis and queue, and serves
``create_app(queue)`` on a real loopback WSGI server; it yields the app's URL.
:func:`stream_frames` reads an SSE response frame by frame, as a browser does.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
GUARD = 60  # seconds: a failure guard for every wait

if str(SAMPLES) not in sys.path:
    sys.path.insert(0, str(SAMPLES))


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a real loopback WSGI server (threaded); yields its URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(GUARD)


@contextlib.contextmanager
def sample_worker(redis_url: str, lane: str, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker of ``flask_app.tasks`` consuming queue ``lane``; ready when yielded."""
    import redis

    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "CELERY_QUEUE": lane,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(SAMPLES)]),
    }
    ready = f"test:ready:{lane}"
    boot = (
        "import sys, redis; from celery.signals import worker_ready\n"
        f"worker_ready.connect(lambda **_: redis.Redis.from_url({redis_url!r}).rpush({ready!r}, 1),"
        " weak=False)\n"
        "from celery.__main__ import main; sys.exit(main())"
    )
    command = [sys.executable, "-c", boot, "-A", "flask_app.tasks", "worker", "--pool=threads",
               "--concurrency=4", "-n", f"{lane}@test", "--without-gossip", "--without-mingle"]
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            command, cwd=SAMPLES, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        client = redis.Redis.from_url(redis_url, socket_timeout=GUARD + 5)  # blocks below
        if client.blpop([ready], timeout=GUARD) is None:
            pytest.fail(f"the sample's worker did not start:\n{log_path.read_text()[-3000:]}")
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@contextlib.contextmanager
def sample_on_celery(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The sample app served here, its runs on a real Celery worker; yields the app's URL."""
    pytest.importorskip("celery")
    lane = f"sample-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CELERY_QUEUE", lane)
    import flask_app
    import flask_app.tasks

    tasks = importlib.reload(flask_app.tasks)  # this test's Redis and queue
    with (
        sample_worker(redis_url, lane, tmp_path / "worker.log"),
        serving(flask_app.create_app(tasks.queue)) as url,
    ):
        yield url


def stream_frames(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` frames of an SSE response, each as soon as it arrived."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "event" in fields and "data" in fields:
                yield fields["event"], json.loads(fields["data"])
            fields = {}
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
