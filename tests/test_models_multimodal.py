"""Images, files and sounds on the OpenAI-compatible wire, over loopback HTTP.

Request bodies are compared with the content-part shapes OpenAI's API reference documents
(``tests/fixtures/wire_media/SOURCES.md``); audio replies are replayed from recorded shapes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AudioPart,
    ChatModelAgent,
    FilePart,
    ImagePart,
    Message,
    Role,
    Runner,
    TextPart,
    concat_messages,
    tool,
    user_message,
)
from agentkit.errors import ContentPartError
from agentkit.models import OpenAIChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call
from tests.media_samples import mp3, pdf, png, wav
from tests.misbehaving_server import RawServer, replay

FIXTURES = Path(__file__).parent / "fixtures" / "wire_media"
PNG = png()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sent(message: Message, *, stream: bool) -> list[dict[str, Any]]:
    with FakeOpenAIServer() as server:
        server.queue(Reply("ok"))
        model = OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="sk-test")
        with model:
            if stream:
                with model.stream([message]) as reader:
                    assert concat_messages(list(reader)).content == "ok"
            else:
                assert model.generate([message]).content == "ok"
        return server.requests[0]["messages"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("stream", [False, True])
def test_every_part_kind_goes_out_in_the_documented_request_shape(stream: bool) -> None:
    message = user_message(
        [
            "Compare these:",
            ImagePart(PNG, detail="high"),
            ImagePart(url="https://upload.wikimedia.org/cat.jpg", detail="low"),
            ImagePart(url="https://example.com/plain.png"),
            AudioPart(wav(), media_type="audio/wav"),
            AudioPart(mp3(), media_type="audio/mpeg"),
            FilePart(pdf(), filename="contract.pdf"),
        ]
    )
    assert sent(message, stream=stream) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these:"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{b64(PNG)}", "detail": "high"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "https://upload.wikimedia.org/cat.jpg", "detail": "low"},
                },
                {"type": "image_url", "image_url": {"url": "https://example.com/plain.png"}},
                {"type": "input_audio", "input_audio": {"data": b64(wav()), "format": "wav"}},
                {"type": "input_audio", "input_audio": {"data": b64(mp3()), "format": "mp3"}},
                {
                    "type": "file",
                    "file": {
                        "file_data": f"data:application/pdf;base64,{b64(pdf())}",
                        "filename": "contract.pdf",
                    },
                },
            ],
        }
    ]


def test_a_plain_text_message_is_still_a_string_content() -> None:
    assert sent(user_message("hi"), stream=False) == [{"role": "user", "content": "hi"}]


def test_a_file_by_url_is_refused_on_chat_completions_with_a_clear_error() -> None:
    with pytest.raises(ContentPartError, match="takes a file's bytes, not a URL"):
        sent(user_message([FilePart(url="https://example.com/a.pdf")]), stream=False)


def _audio_reply(name: str, stream: bool) -> Message:
    body = (FIXTURES / name).read_bytes()
    kind = "text/event-stream" if name.endswith(".sse") else "application/json"
    with (
        RawServer(replay(body, kind)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0) as model,
    ):
        if stream:
            with model.stream([user_message("Are golden retrievers good family dogs?")]) as reader:
                return concat_messages(list(reader))
        return model.generate([user_message("Are golden retrievers good family dogs?")])


def test_an_audio_reply_is_read_as_transcript_and_sound() -> None:
    reply = _audio_reply("openai-audio.json", stream=False)
    data = json.loads((FIXTURES / "openai-audio.json").read_text())
    sound = base64.b64decode(data["choices"][0]["message"]["audio"]["data"])
    assert reply.content == "Yes, golden retrievers are good family dogs."
    assert reply.parts == (
        TextPart("Yes, golden retrievers are good family dogs."),
        AudioPart(sound, media_type="audio/wav"),
    )
    assert reply.extra == {"audio_id": "audio_6744e5a1b8e08190a1f4c6f2f1d0b3c4"}


def test_a_streamed_audio_reply_is_joined_into_one_sound() -> None:
    reply = _audio_reply("openai-stream-audio.sse", stream=True)
    assert reply.content == "Yes, they are."
    assert reply.parts == (
        TextPart("Yes, they are."),
        AudioPart(bytes(range(40)), media_type="audio/pcm"),
    )
    assert reply.extra == {"audio_id": "audio_6744e5a1b8e08190a1f4c6f2f1d0b3c5"}
    usage = reply.response_meta.usage if reply.response_meta else None
    assert usage is not None and usage.total_tokens == 77


def test_an_audio_reply_is_referred_to_by_its_id_on_the_next_request() -> None:
    reply = _audio_reply("openai-audio.json", stream=False)
    with FakeOpenAIServer() as server:
        server.queue(Reply("ok"))
        with OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="k") as model:
            model.generate([user_message("hi"), reply, user_message("and cats?")])
        assert server.requests[0]["messages"][1] == {
            "role": "assistant",
            "content": "Yes, golden retrievers are good family dogs.",
            "audio": {"id": "audio_6744e5a1b8e08190a1f4c6f2f1d0b3c4"},
        }


# --- tools that return media ------------------------------------------------------------


@tool
def screenshot(page: str) -> list[object]:
    """Take a screenshot of a page."""
    return [f"Screenshot of {page}", ImagePart(PNG)]


@tool
def clock() -> str:
    """Tell the time."""
    return "noon"


def _tool_calls(*names: str) -> Reply:
    return Reply(
        tool_calls=[
            call(name, {} if name == "clock" else {"page": "home"}, id=f"call_{number}")
            for number, name in enumerate(names)
        ]
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_a_tool_returning_an_image_reaches_the_model_in_a_user_message_after_the_tool_turn(
    streaming: bool,
) -> None:
    with FakeOpenAIServer() as server:
        server.queue(_tool_calls("screenshot", "clock"), Reply("A red dot at noon."))
        model = OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("browser", "browses", model, tools=[screenshot, clock])
        result = Runner(agent, enable_streaming=streaming).invoke("Look at the home page")
        assert result.text == "A red dot at noon."
        messages = server.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    first_tool = messages[2]
    assert first_tool["tool_call_id"] == "call_0"
    assert first_tool["content"].startswith("Screenshot of home\n[The result includes 1 attachment")
    assert "Attachments of tool call call_0" in first_tool["content"]
    assert messages[3] == {"role": "tool", "content": "noon", "tool_call_id": "call_1"}
    assert messages[4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attachments of tool call call_0 (screenshot):"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        ],
    }


def test_a_tool_message_with_parts_keeps_them_in_the_run() -> None:
    with FakeOpenAIServer() as server:
        server.queue(_tool_calls("screenshot"), Reply("done"))
        model = OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("browser", "browses", model, tools=[screenshot])
        events = list(Runner(agent).query("look"))
    tool_messages = [
        e.output.message_output.message
        for e in events
        if e.output and e.output.message_output and e.output.message_output.role is Role.TOOL
    ]
    assert tool_messages and tool_messages[0] is not None
    assert tool_messages[0].parts == (TextPart("Screenshot of home"), ImagePart(PNG))
