"""Content parts: values, checks at the door, messages made of parts and how they persist."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings

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
    user_message,
)
from agentkit.checkpoint import PickleSerializer
from agentkit.errors import AgentKitError, ContentPartError
from agentkit.models import ScriptedChatModel
from agentkit.schema import (
    MESSAGE_ID_KEY,
    ContentPart,
    PartLimits,
    describe_part,
    ensure_message_id,
    message_id,
    part_limits,
    set_part_limits,
)
from tests.media_samples import mp3, pdf, png, wav
from tests.strategies import messages_with_parts

PNG = png()


def every_part_kind() -> list[object]:
    return [
        TextPart("Look: "),
        ImagePart(PNG, detail="high"),
        ImagePart(url="https://example.com/cat.png", detail="low"),
        FilePart(pdf(), filename="contract.pdf"),
        FilePart(url="https://example.com/a.pdf", media_type="application/pdf"),
        AudioPart(wav(), media_type="audio/wav"),
        AudioPart(mp3(), media_type="audio/mp3"),
        TextPart("what is it?"),
    ]


def test_parts_are_values_equal_by_content_and_immutable() -> None:
    assert ImagePart(PNG) == ImagePart(bytes(PNG))
    assert hash(ImagePart(PNG)) == hash(ImagePart(bytearray(PNG)))
    assert ImagePart(PNG) != ImagePart(PNG, detail="low")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ImagePart(PNG).data = b""  # type: ignore[misc]


def test_media_type_is_read_from_the_bytes_and_the_repr_shows_a_size() -> None:
    part = ImagePart(PNG)
    assert part.media_type == "image/png"
    assert (
        repr(part)
        == f"ImagePart(data=<{len(PNG)} bytes>, url=None, media_type='image/png', detail=None)"
    )
    assert FilePart(pdf()).media_type == "application/pdf"
    assert FilePart(b"plain text").media_type == "application/octet-stream"
    assert AudioPart(mp3(), media_type="audio/mp3").media_type == "audio/mpeg"


def test_a_data_url_is_decoded_into_bytes() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert ImagePart(url=url) == ImagePart(PNG)


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: ImagePart(), "exactly one of data"),
        (lambda: ImagePart(PNG, url="https://example.com/x.png"), "exactly one of data"),
        (lambda: ImagePart(PNG[:-12]), "IEND"),
        (lambda: ImagePart(PNG[:40], media_type="image/png"), "truncated"),
        (lambda: ImagePart(b"MZ\x90\x00" + b"\x00" * 60, media_type="image/png"), "program"),
        (lambda: ImagePart(b"\x7fELF" + b"\x00" * 60), "program"),
        (lambda: ImagePart(PNG, media_type="image/jpeg"), "'image/png'"),
        (lambda: ImagePart(pdf(), media_type="application/pdf"), "not an image type"),
        (lambda: ImagePart(b"hello there"), "media_type"),
        (lambda: FilePart(b"#!/bin/sh\nrm -rf /", media_type="application/pdf"), "program"),
        (lambda: FilePart(pdf()[:30], media_type="application/pdf"), "%%EOF"),
        (lambda: AudioPart(wav()[:30], media_type="audio/wav"), "RIFF"),
        (lambda: AudioPart(PNG, media_type="audio/wav"), "'image/png'"),
        (lambda: ImagePart(url="file:///etc/passwd"), "file://"),
        (lambda: ImagePart(url="http://169.254.169.254/latest/meta-data/"), "169.254.169.254"),
        (lambda: ImagePart(url="http://127.0.0.1:8080/a.png"), "loopback"),
        (lambda: ImagePart(url="http://10.1.2.3/a.png"), "private"),
        (lambda: ImagePart(url="http://[::1]/a.png"), "loopback"),
        (lambda: ImagePart(url="http://[::ffff:169.254.169.254]/a.png"), "link-local"),
        (lambda: ImagePart(url="http://2130706433/a.png"), "loopback"),
        (lambda: ImagePart(url="http://localhost/a.png"), "this machine"),
        (lambda: ImagePart(url="http://metadata.google.internal/x"), "this machine"),
        (lambda: FilePart(url="https://user:secret@example.com/a.pdf"), "credentials"),
        (lambda: FilePart(url="gopher://example.com/"), "gopher://"),
        (lambda: ImagePart(url="data:image/png,notbase64"), "base64"),
    ],
)
def test_bad_parts_are_refused_with_a_content_part_error_that_says_why(
    build: object, words: str
) -> None:
    with pytest.raises(ContentPartError) as caught:
        build()  # type: ignore[operator]
    assert isinstance(caught.value, AgentKitError) and isinstance(caught.value, ValueError)
    assert words in str(caught.value)


def test_the_part_size_and_count_limits_name_the_part_and_the_cap() -> None:
    previous = set_part_limits(PartLimits(max_part_bytes=1000, max_parts=3))
    try:
        with pytest.raises(
            ContentPartError, match=r"ImagePart of 2\d{3} bytes is over the limit of 1000"
        ):
            ImagePart(png(padding=2000))
        with pytest.raises(ContentPartError, match="4 parts is over the limit of 3"):
            user_message(["a", "b", "c", "d"])
    finally:
        set_part_limits(previous)
    assert part_limits() == previous
    with pytest.raises(ValueError, match="positive"):
        PartLimits(max_parts=0)


def test_a_200_mb_file_is_refused_by_the_default_limit() -> None:
    big = b"%PDF-1.4\n" + bytes(200 * 1024 * 1024)
    with pytest.raises(ContentPartError, match="over the limit of 52428800 bytes"):
        FilePart(big)


def test_a_message_of_parts_has_the_text_of_its_text_parts_as_content() -> None:
    message = user_message(["What is ", ImagePart(PNG), TextPart("this?")])
    assert message.parts == (TextPart("What is "), ImagePart(PNG), TextPart("this?"))
    assert message.content == "What is this?"
    assert Message(Role.USER, "What is this?", parts=message.parts) == message
    with pytest.raises(ContentPartError, match="differs from their text"):
        Message(Role.USER, "other", parts=message.parts)


def test_a_plain_text_message_is_what_it_was() -> None:
    message = user_message("hi")
    assert message.parts == ()
    assert message.to_dict() == {"role": "user", "content": "hi"}
    assert "parts" not in message.__getstate__()
    assert "parts" not in repr(message)


def test_a_raw_openai_content_array_is_read_into_parts() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    raw = [
        {"type": "text", "text": "Describe "},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
        {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(wav()).decode(), "format": "wav"},
        },
        {
            "type": "file",
            "file": {
                "file_data": "data:application/pdf;base64," + base64.b64encode(pdf()).decode(),
                "filename": "a.pdf",
            },
        },
    ]
    message = Message(Role.USER, raw)  # type: ignore[arg-type]
    assert message.content == "Describe "
    assert message.parts == (
        TextPart("Describe "),
        ImagePart(PNG, detail="low"),
        AudioPart(wav(), media_type="audio/wav"),
        FilePart(pdf(), filename="a.pdf"),
    )
    assert user_message(raw).parts == message.parts  # type: ignore[arg-type]
    assert Message.from_dict({"role": "user", "content": raw}).parts == message.parts


@pytest.mark.parametrize(
    "content",
    [{"type": "text"}, [{"type": "video", "url": "x"}], [object()], 42, b"bytes"],
)
def test_content_a_store_cannot_keep_is_refused_at_the_door(content: object) -> None:
    with pytest.raises(ContentPartError):
        Message(Role.USER, content)  # type: ignore[arg-type]


def test_to_dict_carries_every_part_kind_as_json_and_back() -> None:
    message = user_message(every_part_kind())  # type: ignore[arg-type]
    data = json.loads(json.dumps(message.to_dict()))
    assert data["content"] == "Look: what is it?"
    assert data["parts"][1] == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "media_type": "image/png",
        "detail": "high",
    }
    assert Message.from_dict(data) == message


def test_pickle_and_checkpoints_carry_every_part_kind() -> None:
    message = user_message(every_part_kind())  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(message)) == message
    serializer = PickleSerializer(b"k" * 32)
    restored = serializer.loads(serializer.dumps([message], checkpoint_id="c"), checkpoint_id="c")
    assert restored == [message]
    assert restored[0].parts[1].data == PNG


def test_a_plain_message_checkpoints_byte_for_byte_as_before_parts() -> None:
    # The pickle state of a plain-text message has the eight fields it always had.
    state = user_message("hi").__getstate__()
    assert list(state) == [
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "name",
        "response_meta",
        "extra",
    ]
    old = Message.__new__(Message)
    old.__setstate__(state)
    assert old.parts == () and old == user_message("hi")


def test_concat_messages_joins_text_and_streamed_audio() -> None:
    chunks = [
        Message(Role.ASSISTANT, "Hel"),
        Message(
            Role.ASSISTANT, parts=[TextPart("lo"), AudioPart(b"\x01\x02", media_type="audio/pcm")]
        ),
        Message(Role.ASSISTANT, parts=[AudioPart(b"\x03", media_type="audio/pcm")]),
        Message(Role.ASSISTANT, "!"),
    ]
    merged = concat_messages(chunks)
    assert merged.content == "Hello!"
    assert merged.parts == (
        TextPart("Hello"),
        AudioPart(b"\x01\x02\x03", media_type="audio/pcm"),
        TextPart("!"),
    )


def test_message_ids_are_stable_and_survive_dicts_and_checkpoints() -> None:
    message = user_message("hi")
    assert message_id(message) is None
    with_id = ensure_message_id(message)
    assert message_id(message) is None  # the message given is not changed
    identifier = message_id(with_id)
    assert identifier and with_id.extra[MESSAGE_ID_KEY] == identifier
    assert ensure_message_id(with_id) is with_id
    assert message_id(Message.from_dict(json.loads(json.dumps(with_id.to_dict())))) == identifier
    serializer = PickleSerializer(b"k" * 32)
    restored = serializer.loads(serializer.dumps(with_id, checkpoint_id="c"), checkpoint_id="c")
    assert message_id(restored) == identifier


def test_describe_part_is_a_placeholder_with_type_and_size() -> None:
    assert describe_part(ImagePart(PNG)) == f"[image image/png, {len(PNG)} bytes]"
    assert describe_part(FilePart(pdf(), filename="a.pdf")).startswith(
        "[file 'a.pdf', application/pdf,"
    )


def test_the_notebook_view_shows_an_image_inline() -> None:
    html = user_message(["chart:", ImagePart(PNG)])._repr_html_()
    assert '<img src="data:image/png;base64,' + base64.b64encode(PNG).decode() in html
    assert "chart:" in html
    assert "<img" in ImagePart(PNG)._repr_html_()


# --- what a run is given (issue 49 A22) -------------------------------------------------


def _runner() -> tuple[Runner, ScriptedChatModel]:
    model = ScriptedChatModel(["It is a red dot."])
    return Runner(ChatModelAgent("describer", "describes media", model)), model


@pytest.mark.parametrize("how", ["query", "invoke"])
def test_a_run_takes_text_and_parts_as_one_user_message(how: str) -> None:
    runner, model = _runner()
    given: list[str | ImagePart] = ["What is this?", ImagePart(PNG)]
    result = runner.query(given).result() if how == "query" else runner.invoke(given)
    assert result.text == "It is a red dot."
    sent = model.calls[0].messages[-1]
    assert sent.parts == (TextPart("What is this?"), ImagePart(PNG))


@pytest.mark.parametrize("how", ["query", "invoke"])
def test_a_run_takes_a_message(how: str) -> None:
    runner, model = _runner()
    message = user_message(["Look", ImagePart(PNG)])
    outcome = getattr(runner, how)(message)
    if how == "query":
        outcome.result()
    assert model.calls and model.calls[0].messages[-1] is message


@pytest.mark.parametrize(
    "given",
    [
        42,
        {"role": "user", "content": "hi"},
        [{"role": "user", "content": "hi"}],
        [user_message("a"), "b"],
        b"bytes",
    ],
)
def test_a_run_refuses_anything_else_at_once(given: object) -> None:
    runner, model = _runner()
    for how in ("query", "invoke"):
        with pytest.raises((TypeError, ContentPartError)):
            getattr(runner, how)(given)
    assert model.calls == []


# --- parts through interrupts, checkpoints and event dicts ------------------------------


def test_parts_survive_an_interrupt_and_a_resume_from_a_file_checkpoint(tmp_path: Path) -> None:
    from agentkit import interrupt, tool, with_checkpoint_id
    from agentkit.checkpoint import FileCheckPointStore
    from agentkit.testing import call, calls_message

    @tool
    def look_closer() -> ImagePart:
        """Zoom in, after a human agreed."""
        if not interrupt("Zoom?"):
            return ImagePart(PNG, detail="low")
        return ImagePart(PNG, detail="high")

    model = ScriptedChatModel([calls_message(call("look_closer", {})), "A red dot."])
    agent = ChatModelAgent("describer", "describes", model, tools=[look_closer])
    store = FileCheckPointStore(tmp_path)
    question: list[str | ContentPart] = [
        "What is this?",
        ImagePart(PNG),
        FilePart(pdf(), filename="a.pdf"),
    ]
    events = list(Runner(agent, checkpoint_store=store).query(question, with_checkpoint_id("c")))
    point = events[-1].action.interrupted.contexts[0]  # type: ignore[union-attr]
    # A fresh Runner over the same directory: what it resumes is what the file holds.
    resumed = Runner(agent, checkpoint_store=FileCheckPointStore(tmp_path))
    list(resumed.resume("c", targets={point.id: True}))
    last = model.calls[-1].messages
    assert last[0].parts == tuple(user_message(question).parts)
    assert last[-1].parts == (ImagePart(PNG, detail="high"),)


def test_an_event_dict_carries_small_media_inline_and_large_media_by_reference() -> None:
    from agentkit import event_from_message
    from agentkit.schema import EVENT_INLINE_BYTES

    big = png(padding=EVENT_INLINE_BYTES)
    message = user_message(["see", ImagePart(PNG), ImagePart(big)])
    data = event_from_message(message, None, Role.USER, "").to_dict()
    parts = data["output"]["message"]["parts"]
    assert parts[1]["data"] == base64.b64encode(PNG).decode()
    assert parts[2] == {
        "type": "image",
        "omitted": True,
        "size": len(big),
        "sha256": hashlib.sha256(big).hexdigest(),
        "media_type": "image/png",
    }
    assert len(json.dumps(data)) < 2 * EVENT_INLINE_BYTES


def test_an_agent_tool_sees_the_callers_media_and_returns_its_own() -> None:
    from agentkit import AgentTool
    from agentkit.testing import call, calls_message

    inner_model = ScriptedChatModel(
        [Message(Role.ASSISTANT, parts=["Here is the crop:", ImagePart(PNG, detail="high")])]
    )
    painter = ChatModelAgent("painter", "crops pictures", inner_model)
    outer_model = ScriptedChatModel([calls_message(call("painter", {"request": "crop"})), "ok"])
    boss = ChatModelAgent(
        "boss",
        "delegates",
        outer_model,
        tools=[AgentTool(painter, full_chat_history_as_input=True)],
    )
    question = user_message(["Crop this:", ImagePart(PNG)])
    assert Runner(boss).invoke(question).text == "ok"
    # The inner agent got the caller's conversation, the image included.
    assert any(m.parts == question.parts for m in inner_model.calls[0].messages)
    # The caller's model got the inner agent's answer with its image.
    answer = outer_model.calls[1].messages[-1]
    assert answer.role is Role.TOOL
    assert answer.parts == (TextPart("Here is the crop:"), ImagePart(PNG, detail="high"))


def test_local_runs_take_parts_and_their_event_log_holds_large_media_by_reference() -> None:
    from agentkit import tool
    from agentkit.integrations.runs import LocalRuns
    from agentkit.schema import EVENT_INLINE_BYTES
    from agentkit.testing import call, calls_message

    big = png(padding=EVENT_INLINE_BYTES)

    @tool
    def enlarge() -> ImagePart:
        """Enlarge the picture."""
        return ImagePart(big)

    model = ScriptedChatModel([calls_message(call("enlarge", {})), "Bigger now."])
    agent = ChatModelAgent("editor", "edits pictures", model, tools=[enlarge])
    with LocalRuns({"editor": Runner(agent)}) as runs:
        run_id = runs.submit("editor", ["Enlarge this:", ImagePart(PNG)], owner=None)
        entries = list(runs.events(run_id, owner=None))
    assert model.calls[0].messages[-1].parts == (TextPart("Enlarge this:"), ImagePart(PNG))
    tool_entry = next(
        entry
        for entry in entries
        if entry.kind == "agent" and entry.data.get("output", {}).get("role") == "tool"
    )
    (part,) = tool_entry.data["output"]["message"]["parts"]
    assert part["omitted"] is True and part["size"] == len(big)
    assert sum(len(json.dumps(entry.data)) for entry in entries) < EVENT_INLINE_BYTES


@given(messages_with_parts)
@settings(max_examples=60, deadline=None)
def test_messages_with_parts_round_trip_through_json_pickle_and_checkpoints(
    message: Message,
) -> None:
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    assert pickle.loads(pickle.dumps(message)) == message
    serializer = PickleSerializer(b"k" * 32)
    assert (
        serializer.loads(serializer.dumps(message, checkpoint_id="c"), checkpoint_id="c") == message
    )
    assert message.content == "".join(p.text for p in message.parts if isinstance(p, TextPart))


def test_a_conversation_turn_with_parts_is_kept_and_sent_again_next_turn(tmp_path: Path) -> None:
    from agentkit import with_conversation_id
    from agentkit.conversation import SQLiteConversationStore

    model = ScriptedChatModel(["A red dot.", "Still a red dot."])
    agent = ChatModelAgent("describer", "describes", model)
    store = SQLiteConversationStore(tmp_path / "chats.db")
    runner = Runner(agent, conversation_store=store)
    runner.invoke(["What is this?", ImagePart(PNG)], with_conversation_id("ann"))
    # A new runner and store over the same file: the next turn sees the image again.
    again = Runner(agent, conversation_store=SQLiteConversationStore(tmp_path / "chats.db"))
    assert again.invoke("And now?", with_conversation_id("ann")).text == "Still a red dot."
    history = model.calls[1].messages
    assert history[0].parts == (TextPart("What is this?"), ImagePart(PNG))
    assert [m.content for m in history] == ["What is this?", "A red dot.", "And now?"]


def test_a_raw_content_array_never_reaches_a_conversation_store(tmp_path: Path) -> None:
    from agentkit import with_conversation_id
    from agentkit.conversation import InMemoryConversationStore

    store = InMemoryConversationStore()
    runner = Runner(
        ChatModelAgent("a", "answers", ScriptedChatModel(["ok", "ok"])), conversation_store=store
    )
    raw = [
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]
    runner.invoke([Message.from_dict({"role": "user", "content": raw})], with_conversation_id("c"))
    runner.invoke("again", with_conversation_id("c"))  # loads the stored turn
    assert store.load("c")[0].parts == (TextPart("hi"), ImagePart(url="https://example.com/a.png"))


def test_the_notebook_view_plays_a_sound_and_the_text_view_names_it() -> None:
    message = Message(Role.ASSISTANT, parts=["Listen:", AudioPart(wav(), media_type="audio/wav")])
    html = message._repr_html_()
    assert '<audio controls src="data:audio/wav;base64,' + base64.b64encode(wav()).decode() in html
    assert f"[audio audio/wav, {len(wav())} bytes]" in html


def test_an_approved_tool_call_returns_its_media_and_invoke_keeps_the_text_form() -> None:
    from agentkit import tool, with_approval, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore
    from agentkit.testing import call, calls_message

    @tool
    def capture() -> list[object]:
        """Capture the screen."""
        return ["Screen:", ImagePart(PNG)]

    assert capture.invoke("") == f"Screen:\n[image image/png, {len(PNG)} bytes]"
    model = ScriptedChatModel([calls_message(call("capture", {})), "A red dot."])
    agent = ChatModelAgent("a", "captures", model, tools=[with_approval(capture)])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    stopped = list(runner.query("capture it", with_checkpoint_id("c")))
    point = stopped[-1].action.interrupted.contexts[0]  # type: ignore[union-attr]
    list(runner.resume("c", targets={point.id: True}))
    assert model.calls[-1].messages[-1].parts == (TextPart("Screen:"), ImagePart(PNG))
