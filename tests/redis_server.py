"""Run a real, throwaway ``redis-server`` for tests.

:func:`running_redis_server` starts the ``redis-server`` binary on a free loopback port in a
temporary directory (no persistence), waits until it answers ``PING`` and stops it afterwards.
The session-scoped :func:`redis_url` fixture wraps it: it skips the tests that use it when the
binary (or redis-py) is missing, unless ``AGENTKIT_REQUIRE_REDIS`` is set (CI sets it), in
which case a missing server is a failure.

Use the fixture from a test module with ``from redis_server import redis_url  # noqa: F401``
(or ``from tests.redis_server import ...`` when ``tests`` is a package).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

STARTUP_TIMEOUT = 30.0  # a failure guard only: the server usually answers within milliseconds
REQUIRE_ENV = "AGENTKIT_REQUIRE_REDIS"


class RedisServerError(RuntimeError):
    """The redis-server process could not be started."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def running_redis_server(binary: str = "redis-server") -> Iterator[str]:
    """Start ``redis-server`` on a free loopback port; yield its ``redis://`` URL; stop it.

    Raises:
        RedisServerError: the binary is missing, exits early, or does not answer ``PING``
            within :data:`STARTUP_TIMEOUT` seconds.
    """
    executable = shutil.which(binary)
    if executable is None:
        raise RedisServerError(f"{binary!r} is not on PATH")
    with tempfile.TemporaryDirectory(prefix="agentkit-redis-") as directory:
        last_error = ""
        for _ in range(3):  # the free port may be taken between choosing and binding it
            port = _free_port()
            log_path = os.path.join(directory, f"redis-{port}.log")
            with open(log_path, "wb") as log:
                command = [executable, "--port", str(port), "--bind", "127.0.0.1"]
                command += ["--dir", directory, "--daemonize", "no"]
                command += ["--save", "", "--appendonly", "no"]  # no persistence
                process = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            try:
                deadline = time.monotonic() + STARTUP_TIMEOUT
                while process.poll() is None and time.monotonic() < deadline:
                    if _answers_ping(port):
                        break
                    time.sleep(0.02)
                else:
                    with open(log_path, "rb") as log_file:
                        last_error = log_file.read().decode(errors="replace")[-2000:]
                    continue
                yield f"redis://127.0.0.1:{port}/0"
                return
            finally:
                _stop(process)
        raise RedisServerError(f"redis-server did not start:\n{last_error}")


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a fresh redis-server for this test session (skipped if none can be run)."""
    try:
        import redis  # noqa: F401  (the store needs redis-py too)
    except ImportError:
        message = "redis-py is not installed: pip install 'agentkit[test]'"
        if _required():
            pytest.fail(f"{message} ({REQUIRE_ENV} is set)")
        pytest.skip(message)
    if shutil.which("redis-server") is None:
        message = (
            "the redis-server binary is not on PATH (apt-get install redis-server); "
            f"set {REQUIRE_ENV}=1 to make this a failure"
        )
        if _required():
            pytest.fail(f"redis-server is required ({REQUIRE_ENV} is set) but not on PATH")
        pytest.skip(message)
    with running_redis_server() as url:
        yield url
