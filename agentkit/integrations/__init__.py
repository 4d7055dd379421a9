"""Integrations with web frameworks and notebooks (each imported on demand)."""
