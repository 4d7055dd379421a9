"""Ready-made multi-agent patterns built from agentkit's agents.

- :mod:`agentkit.prebuilt.supervisor`: a supervisor hands tasks to workers, which report back.
- :mod:`agentkit.prebuilt.planexecute`: plan, then execute and re-plan step by step.

Import the pattern you need explicitly; this package imports nothing itself, so importing
it costs nothing::

    from agentkit.prebuilt import supervisor

    team = supervisor.new(boss, [researcher, writer])
"""
