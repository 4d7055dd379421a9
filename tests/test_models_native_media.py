"""Images, files and sounds on the native wires (Anthropic, Gemini, Responses), over loopback.

Each part kind is sent through the model class to its fake server and the recorded request
body is compared with the shape the provider documents:

* Anthropic Messages API: ``image`` blocks with a ``base64`` or ``url`` source, ``document``
  blocks with a ``base64`` / ``url`` (PDF) or ``text`` (plain text) source and a ``title``;
  a ``tool_result``'s ``content`` holds text, image and document blocks (the API reference
  and the SDK's ``ImageBlockParam``, ``DocumentBlockParam``, ``ToolResultBlockParam``).
* Gemini API: ``Part.inlineData {mimeType, data}`` and ``Part.fileData {mimeType, fileUri}``.
* Responses API: ``input_text``, ``input_image {image_url, detail}`` (``detail`` required),
  ``input_file {file_data, filename}`` or ``{file_url}``, ``input_audio {data, format}``
  (``wav`` or ``mp3``); a ``function_call_output``'s ``output`` may be a list of
  ``input_text``, ``input_image`` and ``input_file`` items (the SDK's
  ``ResponseInputImageParam``, ``ResponseInputFileParam``, ``ResponseInputAudioParam``,
  ``ResponseFunctionCallOutputItemListParam``).

Then one agent run per wire where a tool returns an image: the fake server answers only
when the request carries it where the wire puts it.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agentkit import (
    AudioPart,
    ChatModelAgent,
    FilePart,
    ImagePart,
    Message,
    Runner,
    tool,
    user_message,
)
from agentkit.errors import ContentPartError
from agentkit.models import (
    AnthropicChatModel,
    FailoverChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
)
from agentkit.testing import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOpenAIServer,
    FakeResponsesServer,
    Reply,
    call,
)
from tests.media_samples import mp3, pdf, png, wav

PNG = png()
PDF = pdf()
NOTES = b"Minutes of the meeting.\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@tool
def screenshot(page: str) -> list[object]:
    """Take a screenshot of a page."""
    return [f"Screenshot of {page}", ImagePart(PNG)]


@tool
def recording(name: str) -> list[object]:
    """Fetch a voice recording."""
    return [f"Recording {name}", AudioPart(wav(), media_type="audio/wav")]


def _calls(name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(tool_calls=[call(name, arguments, id="call_0")])


# --- Anthropic ---------------------------------------------------------------------------


def anthropic_sent(message: Message) -> list[dict[str, Any]]:
    with FakeAnthropicServer() as server:
        server.queue(Reply("ok"))
        model = AnthropicChatModel(
            "claude-test", base_url=server.base_url, api_key="k", prompt_caching=False
        )
        with model:
            assert model.generate([message]).content == "ok"
        return server.requests[0]["messages"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("part", "block"),
    [
        (
            ImagePart(PNG),
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
            },
        ),
        (
            ImagePart(url="https://example.com/cat.jpg"),
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        ),
        (
            FilePart(PDF, filename="contract.pdf"),
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
                "title": "contract.pdf",
            },
        ),
        (
            FilePart(url="https://example.com/paper.pdf"),
            {
                "type": "document",
                "source": {"type": "url", "url": "https://example.com/paper.pdf"},
            },
        ),
        (
            FilePart(NOTES, media_type="text/plain", filename="notes.txt"),
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": NOTES.decode()},
                "title": "notes.txt",
            },
        ),
    ],
    ids=["image-bytes", "image-url", "pdf-bytes", "pdf-url", "text-file"],
)
def test_anthropic_sends_each_part_kind_as_its_documented_block(
    part: ImagePart | FilePart, block: dict[str, Any]
) -> None:
    message = user_message(["What is this?", part])
    assert anthropic_sent(message) == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, block]}
    ]


def test_anthropic_refuses_audio_naming_the_part_and_the_model() -> None:
    message = user_message(["Transcribe", AudioPart(wav(), media_type="audio/wav")])
    with pytest.raises(ContentPartError, match=r"\[audio audio/wav, \d+ bytes\].*AnthropicChat"):
        anthropic_sent(message)


def test_anthropic_refuses_a_file_that_is_neither_pdf_nor_text() -> None:
    message = user_message([FilePart(b"\x00\x01binary", media_type="application/zip")])
    with pytest.raises(ContentPartError, match="PDFs and text files"):
        anthropic_sent(message)


def test_anthropic_refuses_an_image_type_it_does_not_read() -> None:
    bmp = b"BM" + b"\x00" * 60
    with pytest.raises(ContentPartError, match="JPEG, PNG, GIF and WebP images, not image/bmp"):
        anthropic_sent(user_message([ImagePart(bmp, media_type="image/bmp")]))


def test_a_failover_from_claude_sends_audio_to_a_model_that_hears() -> None:
    message = user_message(["Transcribe", AudioPart(wav(), media_type="audio/wav")])
    with FakeAnthropicServer() as claude_server, FakeOpenAIServer() as openai_server:
        openai_server.queue(Reply("Silence."))
        claude = AnthropicChatModel("claude-test", base_url=claude_server.base_url, api_key="k")
        gpt = OpenAIChatModel("gpt-4o-audio", base_url=openai_server.base_url, api_key="k")
        with claude, gpt:
            assert FailoverChatModel([claude, gpt]).generate([message]).content == "Silence."
        assert claude_server.requests == []  # refused before sending
        sent = openai_server.requests[0]["messages"][0]["content"][1]
    assert sent == {"type": "input_audio", "input_audio": {"data": b64(wav()), "format": "wav"}}


@pytest.mark.parametrize("streaming", [False, True])
def test_anthropic_a_tool_returning_an_image_reaches_the_model_inside_its_tool_result(
    streaming: bool,
) -> None:
    expected = {
        "type": "tool_result",
        "tool_use_id": "call_0",
        "content": [
            {"type": "text", "text": "Screenshot of home"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
            },
        ],
    }

    def answer(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"][0]["type"] == "text":
            return _calls("screenshot", {"page": "home"})
        block = {key: value for key, value in last["content"][0].items() if key != "cache_control"}
        if block != expected:
            return Reply(status=400, error=f"no image in the tool result: {block}")
        return Reply("A red dot.")

    with FakeAnthropicServer(handler=answer) as server:
        model = AnthropicChatModel("claude-test", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("browser", "browses", model, tools=[screenshot])
        assert (
            Runner(agent, enable_streaming=streaming).invoke("Look at the home page").text
            == "A red dot."
        )
        assert len(server.requests) == 2


# --- Gemini ------------------------------------------------------------------------------


def gemini_sent(message: Message) -> list[dict[str, Any]]:
    with FakeGeminiServer() as server:
        server.queue(Reply("ok"))
        with GeminiChatModel("gemini-test", base_url=server.base_url, api_key="k") as model:
            assert model.generate([message]).content == "ok"
        return server.requests[0]["contents"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (ImagePart(PNG), {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}}),
        (
            ImagePart(url="https://example.com/cat.jpg", media_type="image/jpeg"),
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}},
        ),
        (FilePart(PDF), {"inlineData": {"mimeType": "application/pdf", "data": b64(PDF)}}),
        (
            FilePart(url="https://example.com/paper.pdf", media_type="application/pdf"),
            {
                "fileData": {
                    "mimeType": "application/pdf",
                    "fileUri": "https://example.com/paper.pdf",
                }
            },
        ),
        (
            AudioPart(wav(), media_type="audio/wav"),
            {"inlineData": {"mimeType": "audio/wav", "data": b64(wav())}},
        ),
        (
            AudioPart(mp3(), media_type="audio/mpeg"),
            {"inlineData": {"mimeType": "audio/mpeg", "data": b64(mp3())}},
        ),
    ],
    ids=["image-bytes", "image-url", "pdf-bytes", "pdf-url", "wav", "mp3"],
)
def test_gemini_sends_each_part_kind_as_its_documented_part(
    part: ImagePart | FilePart | AudioPart, sent: dict[str, Any]
) -> None:
    message = user_message(["What is this?", part])
    assert gemini_sent(message) == [{"role": "user", "parts": [{"text": "What is this?"}, sent]}]


@pytest.mark.parametrize("streaming", [False, True])
def test_gemini_a_tool_returning_an_image_reaches_the_model_after_its_function_response(
    streaming: bool,
) -> None:
    expected = [
        {"functionResponse": {"name": "screenshot", "response": {"result": "Screenshot of home"}}},
        {"text": "Attachments of the screenshot result:"},
        {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}},
    ]

    def answer(request: dict[str, Any]) -> Reply:
        parts = request["contents"][-1]["parts"]
        if "text" in parts[0]:
            return _calls("screenshot", {"page": "home"})
        if parts != expected:
            return Reply(status=400, error=f"no image after the function response: {parts}")
        return Reply("A red dot.")

    with FakeGeminiServer(handler=answer) as server:
        model = GeminiChatModel("gemini-test", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("browser", "browses", model, tools=[screenshot])
        assert (
            Runner(agent, enable_streaming=streaming).invoke("Look at the home page").text
            == "A red dot."
        )
        assert len(server.requests) == 2


@tool
def chart_with_voiceover(topic: str) -> list[object]:
    """Draw a chart and record a voice-over."""
    return [f"Chart of {topic}", ImagePart(PNG), AudioPart(wav(), media_type="audio/wav")]


@pytest.mark.parametrize("streaming", [False, True])
def test_gemini_3_holds_a_tool_results_image_inside_its_function_response(streaming: bool) -> None:
    # Gemini 3 models read images, PDFs and text inside functionResponse.parts; a sound still
    # follows the functionResponse, as for every other model.
    expected = [
        {
            "functionResponse": {
                "name": "chart_with_voiceover",
                "response": {"result": "Chart of sales"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": b64(PNG)}}],
            }
        },
        {"text": "Attachments of the chart_with_voiceover result:"},
        {"inlineData": {"mimeType": "audio/wav", "data": b64(wav())}},
    ]

    def answer(request: dict[str, Any]) -> Reply:
        parts = request["contents"][-1]["parts"]
        if "text" in parts[0]:
            return _calls("chart_with_voiceover", {"topic": "sales"})
        if parts != expected:
            return Reply(status=400, error=f"not the Gemini 3 function response: {parts}")
        return Reply("Sales went up.")

    with FakeGeminiServer(handler=answer) as server:
        model = GeminiChatModel("gemini-3-pro-preview", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("analyst", "charts", model, tools=[chart_with_voiceover])
        assert (
            Runner(agent, enable_streaming=streaming).invoke("How did sales go?").text
            == "Sales went up."
        )
        assert len(server.requests) == 2


# --- Responses ---------------------------------------------------------------------------


def responses_sent(message: Message) -> list[dict[str, Any]]:
    with FakeResponsesServer() as server:
        server.queue(Reply("ok"))
        with OpenAIResponsesModel("gpt-test", base_url=server.base_url, api_key="k") as model:
            assert model.generate([message]).content == "ok"
        return server.requests[0]["input"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("part", "item"),
    [
        (
            ImagePart(PNG),
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{b64(PNG)}",
                "detail": "auto",
            },
        ),
        (
            ImagePart(url="https://example.com/cat.jpg", detail="low"),
            {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "low"},
        ),
        (
            FilePart(PDF, filename="contract.pdf"),
            {
                "type": "input_file",
                "file_data": f"data:application/pdf;base64,{b64(PDF)}",
                "filename": "contract.pdf",
            },
        ),
        (
            FilePart(PDF),
            {
                "type": "input_file",
                "file_data": f"data:application/pdf;base64,{b64(PDF)}",
                "filename": "file.pdf",
            },
        ),
        (
            FilePart(url="https://example.com/paper.pdf"),
            {"type": "input_file", "file_url": "https://example.com/paper.pdf"},
        ),
        (
            AudioPart(wav(), media_type="audio/wav"),
            {"type": "input_audio", "input_audio": {"data": b64(wav()), "format": "wav"}},
        ),
        (
            AudioPart(mp3(), media_type="audio/mpeg"),
            {"type": "input_audio", "input_audio": {"data": b64(mp3()), "format": "mp3"}},
        ),
    ],
    ids=["image-bytes", "image-url", "pdf-bytes", "pdf-unnamed", "pdf-url", "wav", "mp3"],
)
def test_responses_sends_each_part_kind_as_its_documented_item(
    part: ImagePart | FilePart | AudioPart, item: dict[str, Any]
) -> None:
    message = user_message(["What is this?", part])
    assert responses_sent(message) == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "What is this?"}, item],
        }
    ]


def test_responses_a_plain_text_message_is_still_a_string_content() -> None:
    assert responses_sent(user_message("hi")) == [
        {"type": "message", "role": "user", "content": "hi"}
    ]


def test_responses_refuses_a_sound_that_is_neither_wav_nor_mp3() -> None:
    message = user_message([AudioPart(b"OggS" + b"\x00" * 40, media_type="audio/ogg")])
    with pytest.raises(ContentPartError, match=r"\[audio audio/ogg.*WAV or MP3"):
        responses_sent(message)


@pytest.mark.parametrize("streaming", [False, True])
def test_responses_a_tool_returning_an_image_reaches_the_model_in_its_output(
    streaming: bool,
) -> None:
    expected = {
        "type": "function_call_output",
        "call_id": "call_0",
        "output": [
            {"type": "input_text", "text": "Screenshot of home"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{b64(PNG)}",
                "detail": "auto",
            },
        ],
    }

    def answer(request: dict[str, Any]) -> Reply:
        last = request["input"][-1]
        if last["type"] == "message":
            return _calls("screenshot", {"page": "home"})
        if last != expected:
            return Reply(status=400, error=f"no image in the function_call_output: {last}")
        return Reply("A red dot.")

    with FakeResponsesServer(handler=answer) as server:
        model = OpenAIResponsesModel("gpt-test", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("browser", "browses", model, tools=[screenshot])
        assert (
            Runner(agent, enable_streaming=streaming).invoke("Look at the home page").text
            == "A red dot."
        )
        assert len(server.requests) == 2


def test_responses_a_tool_returning_a_sound_sends_it_in_a_user_message_after_the_turn() -> None:
    with FakeResponsesServer() as server:
        server.queue(_calls("recording", {"name": "standup"}), Reply("Silence."))
        model = OpenAIResponsesModel("gpt-test", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("listener", "listens", model, tools=[recording])
        assert Runner(agent).invoke("What was said?").text == "Silence."
        output, after = server.requests[1]["input"][-2:]
    assert output["type"] == "function_call_output"
    assert output["output"][0] == {"type": "input_text", "text": "Recording standup"}
    assert output["output"][1]["text"].startswith("[The result includes 1 sound ([audio audio/wav")
    assert after == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Attachments of tool call call_0 (recording):"},
            {"type": "input_audio", "input_audio": {"data": b64(wav()), "format": "wav"}},
        ],
    }
