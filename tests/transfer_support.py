"""Expected transfer texts (written out from the spec, not taken from agentkit) and builders."""

from __future__ import annotations

from agentkit import Message, user_message
from agentkit.testing import call, calls_message

DECISION_RULES = (
    "\n\nDecision rule:\n"
    "- If you're best suited for the question according to your description: ANSWER\n"
    "- If another agent is better according its description: CALL 'transfer_to_agent' "
    "function with their agent name\n\n"
    "When transferring: OUTPUT ONLY THE FUNCTION CALL"
)


def transfer_instruction(*targets: tuple[str, str]) -> str:
    """The system-prompt text listing ``(name, description)`` transfer targets."""
    agents = "".join(
        f"\n- Agent name: {name}\n  Agent description: {description}"
        for name, description in targets
    )
    return f"Available other agents: {agents}{DECISION_RULES}"


def transfer(dest: str, id: str, content: str = "") -> Message:
    """A model reply that transfers to ``dest``."""
    return calls_message(call("transfer_to_agent", {"agent_name": dest}, id=id), content=content)


def context(text: str) -> Message:
    """A history message of another agent, as the default rewriter makes it."""
    return user_message(f"For context: {text}")
