"""Transfer between agents: the flow wrapper, the transfer tool and instruction, history rewriting.

Every test runs real agents on real threads with scripted models and asserts on the whole
observable sequence of events (``summarize``) and on exactly what each model was sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from agentkit import (
    Agent,
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AsyncGenerator,
    AsyncIterator,
    CancelHandle,
    ChatModelAgent,
    HistoryEntry,
    Message,
    Role,
    Runner,
    RunStep,
    ToolInfo,
    TransferError,
    agent_with_options,
    assistant_message,
    event_from_message,
    gen_transfer_messages,
    new_transfer_to_agent_action,
    run_in_worker,
    set_sub_agents,
    system_message,
    tool_message,
    user_message,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_skip_transfer_messages,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize
from tests.transfer_support import context, transfer, transfer_instruction

TRANSFER_TOOL = ToolInfo(
    name="transfer_to_agent",
    description="Transfer the question to another agent.",
    parameters={
        "type": "object",
        "properties": {
            "agent_name": {"type": "string", "description": "the name of the agent to transfer to"}
        },
        "required": ["agent_name"],
    },
)

def transferred(dest: str, id: str) -> Message:
    return tool_message(f"successfully transferred to agent [{dest}]", id, "transfer_to_agent")


def run(agent: Agent, text: str, *options: AgentRunOption, streaming: bool = False) -> list[AgentEvent]:
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text, *options))


# --- parent -> child --------------------------------------------------------------------------


def test_parent_transfers_to_child_which_sees_rewritten_history() -> None:
    # Without a final period: the rewrite adds one (the spec's verified example).
    parent_reply = transfer("ChildAgent", "t1", content="I'll transfer this to the child agent")
    parent_model = ScriptedChatModel([parent_reply])
    child_model = ScriptedChatModel(["The child handled it."])
    parent = ChatModelAgent(
        "ParentAgent", "The parent", parent_model, instruction="You are a parent agent."
    )
    child = ChatModelAgent(
        "ChildAgent",
        "Child agent that handles specific tasks",
        child_model,
        instruction="You are a child agent.",
    )
    events = run(set_sub_agents(parent, [child]), "Please transfer this to the child agent")

    assert [summarize(e) for e in events] == [
        ("ParentAgent", ["ParentAgent"], "assistant", "I'll transfer this to the child agent", None),
        (
            "ParentAgent",
            ["ParentAgent"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [ChildAgent]",
            "transfer:ChildAgent",
        ),
        ("ChildAgent", ["ParentAgent", "ChildAgent"], "assistant", "The child handled it.", None),
    ]
    # The verified full system prompt of the parent (Eino's example, character for character).
    assert parent_model.calls[0].messages == [
        system_message(
            "You are a parent agent.\n\nAvailable other agents: \n- Agent name: ChildAgent\n"
            "  Agent description: Child agent that handles specific tasks\n\nDecision rule:\n"
            "- If you're best suited for the question according to your description: ANSWER\n"
            "- If another agent is better according its description: CALL 'transfer_to_agent' "
            "function with their agent name\n\nWhen transferring: OUTPUT ONLY THE FUNCTION CALL"
        ),
        user_message("Please transfer this to the child agent"),
    ]
    assert parent_model.calls[0].tools == [TRANSFER_TOOL]
    # The child is offered its parent, and sees the parent's turn as context (spec 3.3).
    assert child_model.calls[0].messages == [
        system_message(
            "You are a child agent.\n\n" + transfer_instruction(("ParentAgent", "The parent"))
        ),
        user_message("Please transfer this to the child agent"),
        user_message(
            "For context: [ParentAgent] said: I'll transfer this to the child agent. "
            "[ParentAgent] called tool: `transfer_to_agent` with arguments: "
            '{"agent_name": "ChildAgent"}.'
        ),
        user_message(
            "For context: [ParentAgent] `transfer_to_agent` tool returned result: "
            "successfully transferred to agent [ChildAgent]."
        ),
    ]
    assert child_model.calls[0].tools == [TRANSFER_TOOL]
    assert len(child_model.calls) == 1  # control does not go back to the parent by itself


def test_transfer_targets_are_sub_agents_in_order_then_the_parent() -> None:
    grandpa_model = ScriptedChatModel([transfer("Mom", "g1")])
    mom_model = ScriptedChatModel(["hi"])
    mom = ChatModelAgent("Mom", "mother", mom_model, instruction="Be Mom.")
    kid_a = ChatModelAgent("A", "first kid", ScriptedChatModel([]))
    kid_b = ChatModelAgent("B", "second kid", ScriptedChatModel([]))
    grandpa = ChatModelAgent("Grandpa", "grandfather", grandpa_model)
    flow = set_sub_agents(grandpa, [set_sub_agents(mom, [kid_a, kid_b])])
    run(flow, "hello")
    assert mom_model.calls[0].messages[0] == system_message(
        "Be Mom.\n\n"
        + transfer_instruction(("A", "first kid"), ("B", "second kid"), ("Grandpa", "grandfather"))
    )


def test_empty_instruction_with_transfer_targets_is_the_transfer_instruction_alone() -> None:
    model = ScriptedChatModel(["I answer myself."])
    mom = ChatModelAgent("Mom", "mother", model)
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))
    run(set_sub_agents(mom, [kid]), "hi")
    assert model.calls[0].messages == [
        system_message(transfer_instruction(("Kid", "a kid"))),
        user_message("hi"),
    ]
    assert not model.calls[0].messages[0].content.startswith("\n")


# --- child -> parent -> child --------------------------------------------------------------------


def test_child_transfers_back_and_parent_sees_its_own_messages_verbatim() -> None:
    mom_first = transfer("Kid", "m1")
    mom_second = transfer("Kid", "m2", content="Kid, once more please")
    mom_model = ScriptedChatModel([mom_first, mom_second])
    kid_first = transfer("Mom", "k1", content="Back to you, Mom")
    kid_model = ScriptedChatModel([kid_first, "Done twice."])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = ChatModelAgent("Kid", "a kid", kid_model)
    events = run(set_sub_agents(mom, [kid]), "chores")

    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", "successfully transferred to agent [Kid]", "transfer:Kid"),
        ("Kid", ["Mom", "Kid"], "assistant", "Back to you, Mom", None),
        ("Kid", ["Mom", "Kid"], "tool/transfer_to_agent", "successfully transferred to agent [Mom]", "transfer:Mom"),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant", "Kid, once more please", None),
        (
            "Mom",
            ["Mom", "Kid", "Mom"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [Kid]",
            "transfer:Kid",
        ),
        ("Kid", ["Mom", "Kid", "Mom", "Kid"], "assistant", "Done twice.", None),
    ]
    mom_prompt = system_message(transfer_instruction(("Kid", "a kid")))
    kid_prompt = system_message(transfer_instruction(("Mom", "mother")))
    assert mom_model.calls[1].messages == [
        mom_prompt,
        user_message("chores"),
        mom_first,
        transferred("Kid", "m1"),
        context(
            "[Kid] said: Back to you, Mom. [Kid] called tool: `transfer_to_agent` with arguments: "
            '{"agent_name": "Mom"}.'
        ),
        context("[Kid] `transfer_to_agent` tool returned result: successfully transferred to agent [Mom]."),
    ]
    assert mom_model.calls[1].messages[2] == events[0].get_message()
    assert kid_model.calls[1].messages == [
        kid_prompt,
        user_message("chores"),
        context('[Mom] called tool: `transfer_to_agent` with arguments: {"agent_name": "Kid"}.'),
        context("[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [Kid]."),
        kid_first,
        transferred("Mom", "k1"),
        context(
            "[Mom] said: Kid, once more please. [Mom] called tool: `transfer_to_agent` with "
            'arguments: {"agent_name": "Kid"}.'
        ),
        context("[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [Kid]."),
    ]


def test_transfer_reaches_only_parent_and_children_not_siblings() -> None:
    # Eino's behaviour; the default (recover_tool_errors=True) is in test_tool_errors.py.
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([transfer("A", "m1")]))
    kid_a = ChatModelAgent(
        "A", "kid a", ScriptedChatModel([transfer("B", "a1")]), recover_tool_errors=False
    )
    kid_b = ChatModelAgent("B", "kid b", ScriptedChatModel([]))
    events = run(set_sub_agents(mom, [kid_a, kid_b]), "go")
    assert summarize(events[-1]) == (
        "A",
        ["Mom", "A"],
        "error",
        "agent 'A' transferred to 'B', which it cannot reach: an agent transfers to its "
        "sub-agents and its parent only ('Mom'); make 'B' a sub-agent of 'A' with "
        "set_sub_agents(...)",
        None,
    )


def test_three_levels_a_grandchild_hands_back_up_to_the_root() -> None:
    # The sub-agents of a flow that is itself made a sub-agent keep the right parent.
    grandpa_model = ScriptedChatModel([transfer("Mom", "g1"), "Grandpa sums up."])
    mom_model = ScriptedChatModel([transfer("Kid", "m1"), transfer("Grandpa", "m2")])
    kid_model = ScriptedChatModel([transfer("Mom", "k1")])
    mom_flow = set_sub_agents(
        ChatModelAgent("Mom", "mother", mom_model), [ChatModelAgent("Kid", "a kid", kid_model)]
    )
    flow = set_sub_agents(ChatModelAgent("Grandpa", "grandfather", grandpa_model), [mom_flow])
    events = run(flow, "family meeting")
    assert [summarize(e)[:2] + summarize(e)[4:] for e in events] == [
        ("Grandpa", ["Grandpa"], None),
        ("Grandpa", ["Grandpa"], "transfer:Mom"),
        ("Mom", ["Grandpa", "Mom"], None),
        ("Mom", ["Grandpa", "Mom"], "transfer:Kid"),
        ("Kid", ["Grandpa", "Mom", "Kid"], None),
        ("Kid", ["Grandpa", "Mom", "Kid"], "transfer:Mom"),
        ("Mom", ["Grandpa", "Mom", "Kid", "Mom"], None),
        ("Mom", ["Grandpa", "Mom", "Kid", "Mom"], "transfer:Grandpa"),
        ("Grandpa", ["Grandpa", "Mom", "Kid", "Mom", "Grandpa"], None),
    ]
    assert summarize(events[-1])[3] == "Grandpa sums up."


# --- unknown target -----------------------------------------------------------------------------


def test_transfer_to_unknown_agent_ends_with_error_event() -> None:
    # Eino's behaviour; the default (recover_tool_errors=True) is in test_tool_errors.py.
    mom = ChatModelAgent(
        "Mom", "mother", ScriptedChatModel([transfer("Ghost", "m1")]), recover_tool_errors=False
    )
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))
    events = run(set_sub_agents(mom, [kid]), "boo")
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "", None),
        (
            "Mom",
            ["Mom"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [Ghost]",
            "transfer:Ghost",
        ),
        (
            "Mom",
            ["Mom"],
            "error",
            "agent 'Mom' transferred to 'Ghost', which it cannot reach: an agent transfers to "
            "its sub-agents and its parent only ('Kid'); make 'Ghost' a sub-agent of 'Mom' "
            "with set_sub_agents(...)",
            None,
        ),
    ]
    assert isinstance(events[-1].err, TransferError)


# --- skip transfer messages ---------------------------------------------------------------------


def test_skip_transfer_messages_drops_transfer_calls_and_results_from_the_history() -> None:
    mom_model = ScriptedChatModel([transfer("Kid", "m1", content="Over to Kid."), "Thanks, Kid."])
    kid_model = ScriptedChatModel([transfer("Mom", "k1", content="The answer is 42.")])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = ChatModelAgent("Kid", "a kid", kid_model)
    events = run(set_sub_agents(mom, [kid]), "question", with_skip_transfer_messages())

    assert [summarize(e)[:3] for e in events] == [
        ("Mom", ["Mom"], "assistant"),
        ("Mom", ["Mom"], "tool/transfer_to_agent"),
        ("Kid", ["Mom", "Kid"], "assistant"),
        ("Kid", ["Mom", "Kid"], "tool/transfer_to_agent"),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant"),
    ]
    # The whole assistant message that called the transfer tool goes, content included.
    assert kid_model.calls[0].messages == [
        system_message(transfer_instruction(("Mom", "mother"))),
        user_message("question"),
    ]
    assert mom_model.calls[1].messages == [
        system_message(transfer_instruction(("Kid", "a kid"))),
        user_message("question"),
    ]


def test_without_skip_transfer_messages_the_transfer_calls_are_kept() -> None:
    kid_model = ScriptedChatModel(["ok"])
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([transfer("Kid", "m1")]))
    run(set_sub_agents(mom, [ChatModelAgent("Kid", "a kid", kid_model)]), "question")
    assert len(kid_model.calls[0].messages) == 4


# --- disallow transfer to parent ------------------------------------------------------------------


def test_disallow_transfer_to_parent_leaves_parent_out_of_instruction_and_tools() -> None:
    kid_model = ScriptedChatModel(["I can only answer."])
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([transfer("Kid", "m1")]))
    kid = agent_with_options(
        ChatModelAgent("Kid", "a kid", kid_model, instruction="You are a kid."),
        disallow_transfer_to_parent=True,
    )
    events = run(set_sub_agents(mom, [kid]), "hi")
    assert summarize(events[-1]) == ("Kid", ["Mom", "Kid"], "assistant", "I can only answer.", None)
    assert kid_model.calls[0].messages[0] == system_message("You are a kid.")
    assert kid_model.calls[0].tools == []


def test_disallow_transfer_to_parent_keeps_own_sub_agents_as_targets() -> None:
    kid_model = ScriptedChatModel(["fine"])
    kid = ChatModelAgent("Kid", "a kid", kid_model, instruction="You are a kid.")
    grandkid = ChatModelAgent("Baby", "a baby", ScriptedChatModel([]))
    kid_flow = agent_with_options(set_sub_agents(kid, [grandkid]), disallow_transfer_to_parent=True)
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([transfer("Kid", "m1")]))
    run(set_sub_agents(mom, [kid_flow]), "hi")
    assert kid_model.calls[0].messages[0] == system_message(
        "You are a kid.\n\n" + transfer_instruction(("Baby", "a baby"))
    )
    assert kid_model.calls[0].tools == [TRANSFER_TOOL]


# --- custom history rewriter -----------------------------------------------------------------------


def test_custom_history_rewriter_receives_history_entries_and_builds_the_input() -> None:
    seen: list[list[HistoryEntry]] = []

    def rewriter(entries: list[HistoryEntry]) -> list[Message]:
        seen.append(list(entries))
        speakers = ", ".join(entry.agent_name or "user" for entry in entries)
        return [user_message(f"history by: {speakers}")]

    mom_reply = transfer("Kid", "m1", content="Kid will do it.")
    kid_model = ScriptedChatModel(["done"])
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([mom_reply]))
    kid = agent_with_options(
        ChatModelAgent("Kid", "a kid", kid_model, instruction="Kid."),
        history_rewriter=rewriter,
        disallow_transfer_to_parent=True,
    )
    run(set_sub_agents(mom, [kid]), "please")
    assert seen == [
        [
            HistoryEntry(is_user_input=True, agent_name="", message=user_message("please")),
            HistoryEntry(is_user_input=False, agent_name="Mom", message=mom_reply),
            HistoryEntry(is_user_input=False, agent_name="Mom", message=transferred("Kid", "m1")),
        ]
    ]
    assert kid_model.calls[0].messages == [
        system_message("Kid."),
        user_message("history by: user, Mom, Mom"),
    ]


# --- several transfer calls in one message -------------------------------------------------------


def test_several_transfer_calls_in_one_message_the_last_one_wins() -> None:
    mom_reply = calls_message(
        call("transfer_to_agent", {"agent_name": "A"}, id="c1"),
        call("transfer_to_agent", {"agent_name": "B"}, id="c2"),
    )
    a_model = ScriptedChatModel([])
    b_model = ScriptedChatModel(["B here."])
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([mom_reply]))
    kid_a = ChatModelAgent("A", "kid a", a_model)
    kid_b = ChatModelAgent("B", "kid b", b_model)
    events = run(set_sub_agents(mom, [kid_a, kid_b]), "who?")
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", "successfully transferred to agent [A]", "transfer:A"),
        ("Mom", ["Mom"], "tool/transfer_to_agent", "successfully transferred to agent [B]", "transfer:B"),
        ("B", ["Mom", "B"], "assistant", "B here.", None),
    ]
    assert a_model.calls == []
    # B sees both calls and both results, in call order.
    assert b_model.calls[0].messages[2:] == [
        context(
            '[Mom] called tool: `transfer_to_agent` with arguments: {"agent_name": "A"}. '
            '[Mom] called tool: `transfer_to_agent` with arguments: {"agent_name": "B"}.'
        ),
        context("[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [A]."),
        context("[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [B]."),
    ]


# --- streaming --------------------------------------------------------------------------------------


def test_transfer_in_streaming_mode() -> None:
    mom_model = ScriptedChatModel([transfer("Kid", "m1", content="Passing this on")])
    kid_model = ScriptedChatModel(["A streamed answer from the kid."])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = ChatModelAgent("Kid", "a kid", kid_model)
    events = run(set_sub_agents(mom, [kid]), "stream it", streaming=True)
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "Passing this on", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", "successfully transferred to agent [Kid]", "transfer:Kid"),
        ("Kid", ["Mom", "Kid"], "assistant", "A streamed answer from the kid.", None),
    ]
    streaming = [e.output.message_output.is_streaming for e in events]  # type: ignore[union-attr]
    assert streaming == [True, False, True]
    assert [c.streaming for c in mom_model.calls + kid_model.calls] == [True, True]
    assert kid_model.calls[0].messages[2:] == [
        context(
            "[Mom] said: Passing this on. [Mom] called tool: `transfer_to_agent` with arguments: "
            '{"agent_name": "Kid"}.'
        ),
        context("[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [Kid]."),
    ]


# --- options --------------------------------------------------------------------------------------


def test_options_designated_to_a_transfer_target_reach_it() -> None:
    mom_model = ScriptedChatModel([transfer("Kid", "m1")])
    kid_model = ScriptedChatModel(["ok"])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = ChatModelAgent("Kid", "a kid", kid_model)
    option = with_chat_model_options(temperature=0.25).designate_agent("Kid")
    run(set_sub_agents(mom, [kid]), "hi", option)
    assert mom_model.calls[0].options is None
    assert kid_model.calls[0].options is not None
    assert kid_model.calls[0].options.temperature == 0.25


# --- set_sub_agents rules ---------------------------------------------------------------------------


def test_set_sub_agents_twice_on_a_flow_fails() -> None:
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([]))
    flow = set_sub_agents(mom, [ChatModelAgent("A", "a", ScriptedChatModel([]))])
    with pytest.raises(AgentConfigError, match="agent 'Mom' has its sub-agents already"):
        set_sub_agents(flow, [ChatModelAgent("B", "b", ScriptedChatModel([]))])


def test_set_sub_agents_twice_on_the_same_chat_model_agent_makes_two_flows() -> None:
    # Wiring writes nothing onto the agent: each call is a tree of its own.
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([]))
    first = set_sub_agents(mom, [ChatModelAgent("A", "a", ScriptedChatModel([]))])
    second = set_sub_agents(mom, [ChatModelAgent("B", "b", ScriptedChatModel([]))])
    assert [sub.name for sub in first.sub_agents] == ["A"]
    assert [sub.name for sub in second.sub_agents] == ["B"]
    assert first.agent is second.agent is mom


def test_an_agent_can_be_the_sub_agent_of_two_parents() -> None:
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))
    mom = set_sub_agents(ChatModelAgent("Mom", "mother", ScriptedChatModel([])), [kid])
    dad = set_sub_agents(ChatModelAgent("Dad", "father", ScriptedChatModel([])), [kid])
    (in_mom,) = mom.sub_agents
    (in_dad,) = dad.sub_agents
    assert in_mom.agent is in_dad.agent is kid
    assert in_mom.parent is mom and in_dad.parent is dad


def test_a_flow_with_a_parent_can_be_placed_under_another_parent() -> None:
    kid_flow = agent_with_options(ChatModelAgent("Kid", "a kid", ScriptedChatModel([])))
    mom_flow = set_sub_agents(ChatModelAgent("Mom", "mother", ScriptedChatModel([])), [kid_flow])
    dad_flow = set_sub_agents(
        ChatModelAgent("Dad", "father", ScriptedChatModel([])), mom_flow.sub_agents
    )
    assert dad_flow.sub_agents[0].parent is dad_flow
    assert mom_flow.sub_agents[0].parent is mom_flow  # the first tree is unchanged


def test_an_agent_that_ran_can_still_be_wired() -> None:
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel(["hello"] * 2))
    run(mom, "hi")
    flow = set_sub_agents(mom, [ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))])
    assert [sub.name for sub in flow.sub_agents] == ["Kid"]
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(["hello"]))
    run(kid, "hi")
    dad = set_sub_agents(ChatModelAgent("Dad", "father", ScriptedChatModel([])), [kid])
    assert dad.sub_agents[0].agent is kid


# --- custom agents --------------------------------------------------------------------------------


class HookedAgent:
    """A custom agent that records the OnSubAgents hooks and replies from a list of events."""

    def __init__(self, name: str, replies: Sequence[AgentEvent] = ()) -> None:
        self.name = name
        self.description = f"custom agent {name}"
        self.replies = list(replies)
        self.hooks: list[tuple[str, Any]] = []
        self.inputs: list[list[Message]] = []

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        self.hooks.append(("on_set_sub_agents", [a.name for a in sub_agents]))

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        self.hooks.append(("on_set_as_sub_agent", parent.name))

    def on_disallow_transfer_to_parent(self) -> None:
        self.hooks.append(("on_disallow_transfer_to_parent", None))

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        self.inputs.append(list(input.messages))

        def work(generator: AsyncGenerator[AgentEvent]) -> None:
            for event in self.replies:
                generator.send(event)

        return run_in_worker(work)


def said(text: str) -> AgentEvent:
    return event_from_message(assistant_message(text), None, Role.ASSISTANT)


def transfer_events(dest: str) -> list[AgentEvent]:
    call_message, result = gen_transfer_messages(dest)
    tool_event = event_from_message(result, None, Role.TOOL, result.tool_name)
    tool_event = attrs.evolve(tool_event, action=new_transfer_to_agent_action(dest))
    return [event_from_message(call_message, None, Role.ASSISTANT), tool_event]


def test_set_sub_agents_calls_the_on_sub_agents_hooks_of_custom_agents() -> None:
    mom = HookedAgent("Mom")
    kid = HookedAgent("Kid")
    free = HookedAgent("Free")
    flow = set_sub_agents(mom, [agent_with_options(kid, disallow_transfer_to_parent=True), free])
    assert mom.hooks == [("on_set_sub_agents", ["Kid", "Free"])]
    assert kid.hooks == [("on_set_as_sub_agent", "Mom"), ("on_disallow_transfer_to_parent", None)]
    assert free.hooks == [("on_set_as_sub_agent", "Mom")]
    assert flow.name == "Mom"
    assert [sub.name for sub in flow.sub_agents] == ["Kid", "Free"]


def test_custom_agents_transfer_and_are_transferred_to() -> None:
    class TwoTurnMom(HookedAgent):
        def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
            first = not self.inputs
            self.replies = (
                [said("Let Kid answer."), *transfer_events("Kid")]
                if first
                else [said("Kid answered."), *transfer_events("Helper")]
            )
            return super().run(input, *options)

    mom = TwoTurnMom("Mom")
    kid_model = ScriptedChatModel([transfer("Mom", "k1")])
    kid = ChatModelAgent("Kid", "a kid", kid_model)
    helper = HookedAgent("Helper", [said("Helper's answer.")])
    flow = set_sub_agents(mom, [kid, helper])
    events = run(flow, "hi")
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "Let Kid answer.", None),
        ("Mom", ["Mom"], "assistant", "", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", "successfully transferred to agent [Kid]", "transfer:Kid"),
        ("Kid", ["Mom", "Kid"], "assistant", "", None),
        ("Kid", ["Mom", "Kid"], "tool/transfer_to_agent", "successfully transferred to agent [Mom]", "transfer:Mom"),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant", "Kid answered.", None),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant", "", None),
        (
            "Mom",
            ["Mom", "Kid", "Mom"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [Helper]",
            "transfer:Helper",
        ),
        ("Helper", ["Mom", "Kid", "Mom", "Helper"], "assistant", "Helper's answer.", None),
    ]
    # A custom agent's input is built from the history like any other agent's.
    assert mom.inputs[0] == [user_message("hi")]
    assert mom.inputs[1][:2] == [user_message("hi"), said("Let Kid answer.").get_message()]
    assert mom.inputs[1][-1] == context(
        "[Kid] `transfer_to_agent` tool returned result: successfully transferred to agent [Mom]."
    )
    assert helper.inputs[0][0] == user_message("hi")
    assert helper.inputs[0][1] == context("[Mom] said: Let Kid answer..")  # the rewrite adds a period
    kid_context = kid_model.calls[0].messages[3]
    assert kid_context.content.startswith("For context: [Mom] called tool: `transfer_to_agent`")


# --- action gating ----------------------------------------------------------------------------------


def test_actions_on_deeper_run_paths_are_ignored() -> None:
    # As forwarded from an agent used as a tool: already named, with a longer run path.
    inner = attrs.evolve(
        transfer_events("Kid")[1], agent_name="Inner", run_path=[RunStep("Mom"), RunStep("Inner")]
    )
    mom = HookedAgent("Mom", [said("before"), inner])
    kid_model = ScriptedChatModel([])
    events = run(set_sub_agents(mom, [ChatModelAgent("Kid", "a kid", kid_model)]), "hi")
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "before", None),
        ("Inner", ["Mom", "Inner"], "tool/transfer_to_agent", "successfully transferred to agent [Kid]", "transfer:Kid"),
    ]
    assert kid_model.calls == []
    # Not recorded either: an agent started afterwards sees only Mom's own message.
    assert mom.inputs == [[user_message("hi")]]


def test_an_event_without_action_after_a_transfer_cancels_the_transfer() -> None:
    mom = HookedAgent("Mom", [*transfer_events("Kid"), said("Never mind, I'll answer.")])
    kid_model = ScriptedChatModel([])
    events = run(set_sub_agents(mom, [ChatModelAgent("Kid", "a kid", kid_model)]), "hi")
    assert summarize(events[-1]) == ("Mom", ["Mom"], "assistant", "Never mind, I'll answer.", None)
    assert kid_model.calls == []


def test_cancel_at_a_transfer_saves_a_checkpoint_and_resume_makes_the_transfer() -> None:
    handle = CancelHandle()

    class CancellingMom(HookedAgent):
        def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
            def work(generator: AsyncGenerator[AgentEvent]) -> None:
                call_event, transfer_event = transfer_events("Kid")
                generator.send(call_event)
                generator.send(transfer_event)
                handle.cancel()  # the user cancels just as Mom hands over

            return run_in_worker(work)

    kid_model = ScriptedChatModel(["Kid takes over."])
    store = InMemoryCheckPointStore()
    runner = Runner(
        set_sub_agents(CancellingMom("Mom"), [ChatModelAgent("Kid", "a kid", kid_model)]),
        checkpoint_store=store,
    )
    with no_thread_leak():
        first = list(runner.query("hi", with_cancel(handle), with_checkpoint_id("c1")))
    assert [summarize(e)[:3] for e in first] == [
        ("Mom", ["Mom"], "assistant"),
        ("Mom", ["Mom"], "tool/transfer_to_agent"),
        ("Mom", ["Mom"], "error"),
    ]
    assert isinstance(first[-1].err, AgentCancelledError)
    assert kid_model.calls == []
    assert store.get("c1") is not None
    with no_thread_leak():
        rest = list(runner.resume("c1"))
    assert [summarize(e) for e in rest] == [("Kid", ["Mom", "Kid"], "assistant", "Kid takes over.", None)]
    assert kid_model.calls[0].messages[-1] == context(
        "[Mom] `transfer_to_agent` tool returned result: successfully transferred to agent [Kid]."
    )


# --- gen_transfer_messages ------------------------------------------------------------------------


def test_gen_transfer_messages_makes_a_json_tool_call_and_its_result() -> None:
    call_message, result = gen_transfer_messages("Billing Agent")
    assert call_message.role is Role.ASSISTANT and call_message.content == ""
    [tool_call] = call_message.tool_calls
    assert tool_call.function.name == "transfer_to_agent"
    assert json.loads(tool_call.function.arguments) == {"agent_name": "Billing Agent"}
    assert tool_call.id
    assert result == tool_message(
        "successfully transferred to agent [Billing Agent]", tool_call.id, "transfer_to_agent"
    )
    again, _ = gen_transfer_messages("Billing Agent")
    assert again.tool_calls[0].id != tool_call.id  # a fresh call id each time
