"""An A2A agent written with ``a2a-sdk``'s own server (Starlette, served by uvicorn).

``python sdk_agent.py PORT``. It echoes a message; ``pay ...`` asks for approval
(``input-required``) and the next message on the task completes it. JSON-RPC with the A2A
0.3 methods enabled beside 1.0's.
"""

from __future__ import annotations

import sys

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(message)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_message(f"sdk: {text}d").parts[0]], name="answer")
            await updater.complete()
            return
        if text.startswith("pay"):
            await updater.requires_input(
                new_text_message("approve the payment?", context_id=task.context_id,
                                 task_id=task.id)
            )
            return
        await updater.start_work()
        await updater.add_artifact([new_text_message(f"sdk echo: {text}").parts[0]], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def main() -> None:
    port = int(sys.argv[1])
    card = AgentCard(
        name="sdk_agent",
        description="An agent of a2a-sdk's own server.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC",
                           protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["test"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
