"""A loopback Gemini API server: :class:`FakeGeminiServer`.

``POST /v1beta/models/{model}:generateContent`` answers a ``GenerateContentResponse``;
``:streamGenerateContent?alt=sse`` answers one per Server-Sent Event (the text in pieces, each
function call whole, the last with the ``finishReason`` and the usage). Errors have Google's
shape (``{"error": {"code": 429, "message": ..., "status": "RESOURCE_EXHAUSTED"}}``).
Replies are :class:`~agentkit.testing.Reply`: ``reasoning_content`` is a ``thought`` part,
and with it the reply's first function call (or its text) carries a thought signature;
``finish_reason`` is Gemini's ``finishReason`` (``"MAX_TOKENS"``, ``"SAFETY"``...). A blocked
prompt or a reply without candidates is scripted with ``Reply(raw_body=...)``.

Like Gemini, the server refuses (HTTP 400) a request whose current turn sends back a function
call it signed without that signature.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from typing import Any

from agentkit.testing._fake_http import FakeModelServer, Handler, RequestHandler
from agentkit.testing._openai_replies import Reply, _pieces

__all__ = ["FakeGeminiServer"]

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _signature(text: str) -> str:
    digest = hashlib.sha256(b"agentkit-fake-gemini:" + text.encode()).digest()
    return base64.b64encode(digest).decode()


class FakeGeminiServer(FakeModelServer):
    """A Gemini API server on ``127.0.0.1`` (a free port), serving in a background thread.

    Scripted like :class:`~agentkit.testing.FakeOpenAIServer`; see the module docstring.

    Attributes:
        base_url: ``"http://127.0.0.1:PORT"``.
    """

    def __init__(self, handler: Handler | None = None) -> None:
        super().__init__(handler)
        self._signed: dict[str, str] = {}  # function call (name and args) -> its signature
        self._signed_lock = threading.Lock()

    def _serves(self, path: str) -> bool:
        return path.startswith("/v1beta/models/") and path.endswith(
            (":generateContent", ":streamGenerateContent")
        )

    def _error_payload(self, reply: Reply) -> Any:
        status = _STATUS.get(reply.status, "INTERNAL")
        return {"error": {"code": reply.status, "message": reply.error or status, "status": status}}

    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        problem = self._signature_problem(request)
        if problem:
            handler.send_json(400, self._error_payload(Reply(status=400, error=problem)))
            return
        parts = self._parts(reply)
        usage = _usage(request, reply)
        finish = reply.finish_reason or "STOP"
        if not path.endswith(":streamGenerateContent"):
            handler.send_body(_response(parts, finish, usage, number), reply)
            return
        events: list[bytes] = []
        pieces: list[dict[str, Any]] = []
        for part in parts:
            if "text" in part:
                texts = _pieces(part["text"], reply.chunks)
                for position, text in enumerate(texts):
                    piece = {**part, "text": text}
                    if position < len(texts) - 1:
                        piece.pop("thoughtSignature", None)  # on the part's last piece
                    pieces.append(piece)
            else:
                pieces.append(part)
        for position, piece in enumerate(pieces):
            last = position == len(pieces) - 1
            body = _response([piece], finish if last else None, usage, number)
            events.append(b"data: " + json.dumps(body).encode() + b"\r\n\r\n")
        if not pieces:
            body = _response([], finish, usage, number)
            events.append(b"data: " + json.dumps(body).encode() + b"\r\n\r\n")
        if reply.stream_error:
            error = json.dumps(self._error_payload(Reply(status=503, error=reply.stream_error)))
            events.insert(1, b"event: error\ndata: " + error.encode() + b"\n\n")
        if reply.malformed:
            events.insert(0, b'data: {"candidates": [\n\n')
        handler.send_events(events, reply)

    def _parts(self, reply: Reply) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if reply.reasoning_content:
            parts.append({"text": reply.reasoning_content, "thought": True})
        if reply.content:
            parts.append({"text": reply.content})
        for call in reply.tool_calls:
            try:
                args = json.loads(call.function.arguments or "{}")
            except ValueError:
                args = {}
            parts.append({"functionCall": {"name": call.function.name, "args": args}})
        if reply.reasoning_content:
            signed = next((p for p in parts if "functionCall" in p), None)
            if signed is None:
                signed = next((p for p in parts if "text" in p and not p.get("thought")), None)
            if signed is not None:
                signature = _signature(reply.reasoning_content)
                signed["thoughtSignature"] = signature
                if "functionCall" in signed:
                    with self._signed_lock:
                        self._signed[_key(signed["functionCall"])] = signature
        return parts

    def _signature_problem(self, request: dict[str, Any]) -> str:
        contents = request.get("contents") or []
        # The current turn: from the last user text on.
        start = 0
        for index, content in enumerate(contents):
            if content.get("role") == "user" and any(
                "text" in p for p in content.get("parts") or ()
            ):
                start = index
        for content in contents[start:]:
            if content.get("role") != "model":
                continue
            for part in content.get("parts") or ():
                call = part.get("functionCall")
                if call is None:
                    continue
                with self._signed_lock:
                    expected = self._signed.get(_key(call))
                if expected is not None and part.get("thoughtSignature") != expected:
                    return (
                        f"Function call is missing a thought_signature in functionCall parts "
                        f"({call.get('name')}); send back the signature of each function call"
                    )
        return ""


def _key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("args")], sort_keys=True)


def _words(value: Any) -> int:
    return len(json.dumps(value).split())


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    if reply.usage is not None:
        usage = {
            "promptTokenCount": reply.usage.prompt_tokens,
            "candidatesTokenCount": reply.usage.completion_tokens,
            "totalTokenCount": reply.usage.total_tokens,
        }
        if reply.usage.cached_tokens:
            usage["cachedContentTokenCount"] = reply.usage.cached_tokens
        return usage
    prompt = _words(request.get("contents")) + _words(request.get("systemInstruction"))
    output = len(reply.content.split()) + 5 * len(reply.tool_calls)
    thoughts = len(reply.reasoning_content.split())
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def _response(
    parts: list[dict[str, Any]], finish: str | None, usage: dict[str, int], number: int
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": "gemini-fake",
        "responseId": f"fake-{number}",
    }
