"""agentkit: a thread-based synchronous agent development kit."""

__version__ = "0.1.0"
