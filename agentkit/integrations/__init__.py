"""Integrations with web frameworks, task queues and tracing.

Each integration is a submodule, imported when first used (``agentkit.integrations.flask``),
so the web framework, Celery or OpenTelemetry load only for the application that uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__ = ["celery", "flask", "otel", "redis", "runs"]

if TYPE_CHECKING:
    from agentkit.integrations import celery, flask, otel, redis, runs
else:
    __getattr__, __dir__ = attach(__name__, submodules=__all__)
