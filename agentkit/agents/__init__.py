"""Built-in agents: ChatModelAgent, the flow wrapper and the workflow agents."""
