"""RemoteA2AAgent: a remote A2A agent as an agentkit agent (sub-agent, workflow step, AgentTool)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import httpx

from agentkit._agent import AgentRun, BaseAgent
from agentkit._events import event_from_message
from agentkit._interrupt import interrupt_event
from agentkit._persist import persisted
from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit._values import BuiltValue
from agentkit.errors import AgentKitError, AgentKitValueError
from agentkit.schema import Role, assistant_message
from agentkit.tools._approval import Approve, Reject

__all__ = ["A2AError", "A2AInputRequired", "RemoteA2AAgent"]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_TERMINAL = {"completed", "canceled", "failed", "rejected"}


class A2AError(AgentKitError, RuntimeError):
    """A remote A2A agent could not be reached, answered with an error, or broke the protocol."""


@persisted("agentkit.a2a.A2AInputRequired")
@attrs.frozen
class A2AInputRequired:
    """The interrupt info of a remote A2A task in ``input-required``: what it asks.

    Resume the run with the answer: a ``str`` (sent as a text part), ``True``/``False`` or
    :class:`~agentkit.Approve`/:class:`~agentkit.Reject` (sent as ``approve``/``reject`` and a
    data part ``{"decision": ...}``), or a ``dict`` (sent as a data part).

    Attributes:
        agent: the remote agent's name.
        question: the text of the task's status message.
        data: the data parts of the status message, merged (``{}`` without any).
    """

    agent: str
    question: str
    data: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __str__(self) -> str:
        return f"{self.agent} asks: {self.question}"


class RemoteA2AAgent(BuiltValue, BaseAgent):
    """An agent served elsewhere over A2A (protocol 0.3, JSON-RPC), usable as an agentkit agent.

    ``url`` is the agent's base URL; its card is read from
    ``{url}/.well-known/agent-card.json`` (when ``name`` is not given, at construction). A turn
    sends the last user message as a new task (``message/stream`` when the card says the
    agent streams, else ``message/send``) and emits each message of the remote agent as an
    assistant event, the answer last. A task in ``input-required`` interrupts the run with an
    :class:`A2AInputRequired`; resuming the run (from any process, with a checkpoint store)
    sends the answer as the next message on the same task. Cancelling the run cancels the
    remote task.

    Args:
        url: the remote agent's base URL.
        name: the agent's name here (default: the card's).
        description: its description here (default: the card's).
        timeout: seconds to connect and between two reads of an answer.
        headers: HTTP headers sent with every request (``Authorization``, ...).
        max_message_bytes: the largest answer (a JSON body, one SSE event) read.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if timeout <= 0:
            raise AgentKitValueError(f"timeout must be > 0 seconds (got {timeout})")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.headers = dict(headers or {})
        self.max_message_bytes = max_message_bytes
        self._card: dict[str, Any] | None = None
        if name is None or description is None:
            card = self.card()
            name = name if name is not None else str(card.get("name") or "remote")
            description = (
                description if description is not None else str(card.get("description") or "")
            )
        self.name = name
        self.description = description

    def card(self) -> dict[str, Any]:
        """The remote agent's card, read once and validated with ``a2a-sdk``'s parser (an A2A
        0.3 or 1.0 card): ``name``, ``description``, ``url`` (its JSON-RPC endpoint) and
        ``capabilities``."""
        if self._card is None:
            with httpx.Client(timeout=self.timeout, headers=self.headers) as http:
                try:
                    response = http.get(self.url + "/.well-known/agent-card.json")
                except httpx.HTTPError as error:
                    raise A2AError(
                        f"the A2A agent at {self.url} cannot be reached: {error}"
                    ) from None
            if response.status_code != 200 or len(response.content) > self.max_message_bytes:
                raise A2AError(
                    f"the A2A agent at {self.url} has no agent card (HTTP {response.status_code})"
                )
            self._card = _normalized_card(self.url, response.content)
        return self._card

    def execute(self, run: AgentRun) -> None:
        """Send the turn's message (or the resume answer) and emit the remote task's events."""
        info = run.resume_info
        if info is None:
            text = next(
                (m.content for m in reversed(run.input.messages) if m.role == Role.USER), ""
            )
            if not text and run.input.messages:
                text = run.input.messages[-1].content
            message = _message([{"kind": "text", "text": text}])
            task_id = context_id = None
        else:
            state = info.interrupt_state or {}
            task_id, context_id = state.get("task_id"), state.get("context_id")
            if not info.is_resume_target or task_id is None:
                # Resumed without an answer for this agent: ask again.
                run.emit(interrupt_event(_asked(info), state=state))
                return
            message = _message(_answer_parts(info.resume_data), task_id, context_id)
        self._send(run, message)

    def _send(self, run: AgentRun, message: dict[str, Any]) -> None:
        card = self.card()
        endpoint = str(card.get("url") or self.url + "/")
        streaming = bool(card.get("capabilities", {}).get("streaming"))
        method = "message/stream" if streaming else "message/send"
        request = {
            "jsonrpc": "2.0",
            "id": uuid.uuid4().hex,
            "method": method,
            "params": {"message": message},
        }
        last_text = ""
        final: dict[str, Any] | None = None
        artifacts: list[dict[str, Any]] = []  # streamed ones (a task result carries its own)
        task_id = message.get("taskId")
        with httpx.Client(timeout=self.timeout, headers=self.headers) as http:
            try:
                for result in self._results(http, endpoint, request, streaming):
                    run.check_cancelled()
                    kind = result.get("kind")
                    task_id = result.get("taskId") or result.get("id") or task_id
                    if kind in ("status-update", "task"):
                        status = result.get("status", {})
                        text = _text(status.get("message"))
                        if status.get("state") == "working" and text and text != last_text:
                            said = assistant_message(text)
                            run.emit(event_from_message(said, None, Role.ASSISTANT))
                            last_text = text
                        final = result
                    elif kind == "artifact-update":
                        artifacts.append(result.get("artifact") or {})
                    elif kind == "message":
                        final = {"status": {"state": "completed", "message": result}}
            except BaseException:
                if task_id is not None:
                    self._cancel_remote(http, endpoint, task_id)
                raise
        if final is not None and artifacts:
            final = {**final, "artifacts": [*final.get("artifacts", []), *artifacts]}
        self._finish(run, final, last_text)

    def _finish(self, run: AgentRun, final: dict[str, Any] | None, last_text: str) -> None:
        if final is None:
            raise A2AError(f"the A2A agent {self.name} answered nothing")
        status = final.get("status", {})
        state = status.get("state")
        answer = _artifact_text(final) or _text(status.get("message"))
        if state == "input-required":
            data: dict[str, Any] = {}
            for part in (status.get("message") or {}).get("parts", []):
                if part.get("kind") == "data" and isinstance(part.get("data"), dict):
                    data.update(part["data"])
            text = _text(status.get("message")) or "the remote agent needs input"
            task_id = final.get("taskId") or final.get("id")
            context_id = final.get("contextId")
            run.emit(
                interrupt_event(
                    A2AInputRequired(self.name, text, data),
                    state={"task_id": task_id, "context_id": context_id},
                )
            )
            return
        if state in ("failed", "rejected", "canceled"):
            raise A2AError(f"the A2A task of {self.name} ended {state}: {answer or 'no reason'}")
        if state != "completed":
            raise A2AError(f"the A2A agent {self.name} ended its answer in state {state!r}")
        if answer and answer != last_text:
            run.emit(event_from_message(assistant_message(answer), None, Role.ASSISTANT))

    def _results(
        self, http: httpx.Client, endpoint: str, request: dict[str, Any], streaming: bool
    ) -> Iterator[dict[str, Any]]:
        types = _types()
        model = types.SendStreamingMessageResponse if streaming else types.SendMessageResponse
        try:
            with http.stream("POST", endpoint, json=request) as response, abort_on_cancel(
                response.close
            ):
                check_cancelled()
                if response.status_code != 200:
                    response.read()
                    raise A2AError(_error_text(self.name, response))
                if not streaming or not response.headers.get("content-type", "").startswith(
                    "text/event-stream"
                ):
                    body = _read_capped(response, self.max_message_bytes)
                    yield _checked(self.name, model, body)
                    return
                for line in response.iter_lines():
                    check_cancelled()
                    if len(line) > self.max_message_bytes:
                        raise A2AError(f"the A2A agent {self.name} sent an event over the limit")
                    if line.startswith("data:"):
                        yield _checked(self.name, model, line[5:].strip().encode("utf-8"))
        except httpx.HTTPError as error:
            check_cancelled()
            raise A2AError(f"the A2A agent {self.name} at {endpoint} failed: {error}") from None

    def _cancel_remote(self, http: httpx.Client, endpoint: str, task_id: str) -> None:
        request = {
            "jsonrpc": "2.0",
            "id": uuid.uuid4().hex,
            "method": "tasks/cancel",
            "params": {"id": task_id},
        }
        try:
            http.post(endpoint, json=request, timeout=min(self.timeout, 10.0))
        except httpx.HTTPError:  # best effort: the remote may be gone
            pass


def _types() -> Any:
    try:
        from a2a.compat.v0_3 import types
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise A2AError(
            "agentkit.a2a needs the 'a2a-sdk' package; install it with: pip install 'agentkit[a2a]'"
        ) from error
    return types


def _normalized_card(base_url: str, content: bytes) -> dict[str, Any]:
    """The parts of a card (0.3 or 1.0, parsed by ``a2a-sdk``) that this client uses."""
    try:
        from a2a.client.card_resolver import parse_agent_card
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise A2AError(
            "agentkit.a2a needs the 'a2a-sdk' package; install it with: pip install 'agentkit[a2a]'"
        ) from error
    try:
        data = json.loads(content)
        card = parse_agent_card(data)
    except Exception as error:  # not JSON, or not a card
        text = " ".join(str(error).split())[:300]
        raise A2AError(f"the agent card at {base_url} is not valid: {text}") from None
    endpoints = [
        interface.url
        for interface in card.supported_interfaces
        if interface.protocol_binding.upper() == "JSONRPC" and interface.url
    ]
    if not endpoints:
        raise A2AError(f"the A2A agent at {base_url} offers no JSON-RPC endpoint")
    return {
        "name": card.name,
        "description": card.description,
        "url": endpoints[0],
        "capabilities": {"streaming": bool(card.capabilities.streaming)},
    }


def _read_capped(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise A2AError(f"an A2A answer is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _checked(agent: str, model: Any, body: bytes) -> dict[str, Any]:
    try:
        parsed = model.model_validate_json(body)
    except Exception as error:  # pydantic's ValidationError
        text = " ".join(str(error).split())[:300]
        raise A2AError(f"the A2A agent {agent} broke the protocol: {text}") from None
    data = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    if "error" in data:
        refusal = data["error"]
        raise A2AError(
            f"the A2A agent {agent} refused: {refusal.get('message')} ({refusal.get('code')})"
        )
    result = data.get("result")
    if not isinstance(result, dict):
        raise A2AError(f"the A2A agent {agent} answered without a result")
    return result


def _error_text(agent: str, response: httpx.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except Exception:
        message = response.text[:200]
    return f"the A2A agent {agent} answered HTTP {response.status_code}: {message}"


def _message(
    parts: list[dict[str, Any]], task_id: str | None = None, context_id: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": parts,
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def _answer_parts(answer: Any) -> list[dict[str, Any]]:
    if isinstance(answer, Approve) or answer is True:
        data: dict[str, Any] = {"decision": "approve"}
        if isinstance(answer, Approve) and answer.arguments is not None:
            data = {"decision": "edit", "arguments": dict(answer.arguments)}
        return [{"kind": "text", "text": "approve"}, {"kind": "data", "data": data}]
    if isinstance(answer, Reject) or answer is False:
        reason = answer.reason if isinstance(answer, Reject) else ""
        return [
            {"kind": "text", "text": "reject"},
            {"kind": "data", "data": {"decision": "reject", "reason": reason}},
        ]
    if isinstance(answer, dict):
        return [{"kind": "data", "data": json.loads(json.dumps(answer, default=str))}]
    return [{"kind": "text", "text": "" if answer is None else str(answer)}]


def _asked(info: Any) -> Any:
    interrupted = info.interrupt_info
    return interrupted.data if interrupted is not None else None


def _text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    return "".join(
        str(part.get("text", "")) for part in message.get("parts", []) if part.get("kind") == "text"
    )


def _artifact_text(final: dict[str, Any]) -> str:
    artifacts = final.get("artifacts", [])
    return "".join(_text(artifact) for artifact in artifacts if isinstance(artifact, dict))


# Documented as ``agentkit.a2a.X``.
A2AError.__module__ = "agentkit.a2a"
A2AInputRequired.__module__ = "agentkit.a2a"
RemoteA2AAgent.__module__ = "agentkit.a2a"
