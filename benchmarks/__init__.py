"""agentkit's comparative benchmark suite: ``python -m benchmarks`` (``--help`` for options).

Runs agentkit and a minimal hand-written ReAct loop on ``httpx`` side by side against a
loopback OpenAI-compatible server, interleaved in rounds, and reports medians, spread, the
ratio per round and a budget per scenario. See ``benchmarks/FINDINGS.md`` for a run's table
and where agentkit's overhead is. This package imports nothing heavy at import time, so child
processes started with ``python -m benchmarks.<module>`` pay only for what they use.
"""
