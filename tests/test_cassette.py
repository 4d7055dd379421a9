"""Cassettes: record a model's calls to a file, replay them offline, chunk by chunk.

Recordings are made against real models here: the loopback OpenAI-compatible server over
real HTTP, or the scripted model; replays run with the server stopped, so a call that
reached the network would fail.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentkit import (
    AgentEvent,
    CancelHandle,
    ChatModelAgent,
    Message,
    ParallelAgent,
    Runner,
    ToolInfo,
    assistant_message,
    tool,
    user_message,
    with_cancel,
    with_chat_model_options,
)
from agentkit.errors import (
    AgentCancelledError,
    IncompleteStreamError,
    ModelError,
    RateLimitError,
)
from agentkit.models import (
    ChatModel,
    ModelOptions,
    OpenAIChatModel,
    ScriptedChatModel,
    ToolCallingChatModel,
)
from agentkit.streams import StreamReader, stream_from_list
from agentkit.testing import (
    Cassette,
    CassetteError,
    CassetteMismatchError,
    CassetteUnplayedError,
    FakeOpenAIServer,
    Reply,
    call,
    calls_message,
    cassette,
    no_thread_leak,
    summarize,
)
from agentkit.testing._redact import is_secret_key
from tests.strategies import messages as any_message

GUARD = 30.0  # a failure guard for waits, never a pace
FIXTURES = Path(__file__).parent / "fixtures" / "cassettes"


@tool
def get_weather(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city.
    """
    return f"sunny in {city}, 21°C"


def weather_replies() -> list[Reply]:
    return [
        Reply(tool_calls=[call("get_weather", {"city": "Paris"}, id="call_w1")], chunks=4),
        Reply("It is sunny in Paris, 21°C.\nEnjoy the day!", chunks=5),
    ]


def run_agent(model: ChatModel, *, streaming: bool, instruction: str = "Be brief.") -> list[Any]:
    """Run a weather agent; each event summarized, with the chunks of a streamed message.

    (Over HTTP, the server's thread for the kept-alive connection outlives the run: callers
    that record against the server close the client afterwards.)
    """
    agent = ChatModelAgent("weather", "d", model, instruction=instruction, tools=[get_weather])
    events = list(Runner(agent, enable_streaming=streaming).query("Weather in Paris?"))
    return [(summarize(event), chunks_of(event)) for event in events]


def chunks_of(event: AgentEvent) -> list[Message] | None:
    variant = event.output.message_output if event.output is not None else None
    if variant is None or not variant.is_streaming:
        return None
    return list(variant.open_stream())


# --- record against real HTTP, replay offline -----------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
def test_a_recording_against_the_server_replays_with_the_server_stopped(
    tmp_path: Path, suffix: str, streaming: bool
) -> None:
    path = tmp_path / f"weather{suffix}"
    with FakeOpenAIServer() as server:
        server.queue(*weather_replies())
        with OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key="sk-test", max_retries=0
        ) as live:
            recorded = run_agent(cassette(live, path, mode="record"), streaming=streaming)
        assert len(server.requests) == 2
    # The server is gone: a call that reached the network would fail to connect.
    replayed_model = cassette(live, path)
    with no_thread_leak():
        replayed = run_agent(replayed_model, streaming=streaming)
    assert replayed == recorded
    assert [kind for (_, _, kind, _, _), _ in recorded] == ["assistant", "tool/get_weather", "assistant"]
    assert recorded[-1][0][3] == "It is sunny in Paris, 21°C.\nEnjoy the day!"
    assert replayed_model.calls == 2 and replayed_model.unplayed == 0
    replayed_model.assert_all_played()


def test_streamed_replies_replay_chunk_by_chunk(tmp_path: Path) -> None:
    path = tmp_path / "stream.json"
    with FakeOpenAIServer() as server:
        server.queue(Reply("one two three four five six", chunks=6))
        live = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
        with cassette(live, path, mode="record").stream([user_message("count")]) as reader:
            live_chunks = list(reader)
    replay = cassette(None, path)
    reader = replay.stream([user_message("count")])
    first = reader.recv()  # one chunk at a time, not the whole reply
    rest = list(reader)
    assert [first, *rest] == live_chunks
    assert len([c for c in live_chunks if c.content]) == 6
    assert "".join(c.content for c in live_chunks) == "one two three four five six"
    # A streamed recording also answers a whole call: the chunks concatenated.
    again = cassette(None, path).generate([user_message("count")])
    assert again.content == "one two three four five six"
    assert again.response_meta is not None and again.response_meta.finish_reason == "stop"


def test_a_whole_recording_answers_a_streamed_call_in_one_chunk(tmp_path: Path) -> None:
    path = tmp_path / "whole.json"
    cassette(ScriptedChatModel(["hello"]), path, mode="record").generate([user_message("hi")])
    chunks = list(cassette(None, path).stream([user_message("hi")]))
    assert chunks == [assistant_message("hello")]


# --- mismatches -----------------------------------------------------------------------------


def test_a_changed_prompt_fails_replay_with_a_readable_diff(tmp_path: Path) -> None:
    path = tmp_path / "weather.json"
    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Paris"})), "Sunny."])
    run_agent(cassette(model, path, mode="record"), streaming=False, instruction="Be brief.")
    events = run_agent(cassette(None, path), streaming=False, instruction="Be very detailed.")
    (_, _, kind, text, _), _ = events[-1]
    assert kind == "error"
    assert "call 1 (generate) does not match any recorded call" in text
    assert '-      "content": "Be brief.",' in text
    assert '+      "content": "Be very detailed.",' in text
    assert "mode='record'" in text and "--cassette-mode=record" in text

    with pytest.raises(CassetteMismatchError) as caught:
        cassette(None, path).generate([Message("system", "Be very detailed."), user_message("Weather in Paris?")])
    error = caught.value
    assert error.path == str(path)
    assert error.diff.splitlines()[:2] == ["--- recorded call 1", "+++ call 1 of this run"]


def test_changed_tools_and_options_fail_replay_too(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel(["ok"]), path, mode="record")
    recorder.with_tools([get_weather.info()]).generate([user_message("hi")], ModelOptions(temperature=0.2))
    replay = cassette(None, path)
    with pytest.raises(CassetteMismatchError, match='"temperature": 0.2'):
        replay.with_tools([get_weather.info()]).generate([user_message("hi")], ModelOptions(temperature=0.9))
    with pytest.raises(CassetteMismatchError, match='-      "name": "get_weather"'):
        replay.with_tools([ToolInfo("other")]).generate([user_message("hi")], ModelOptions(temperature=0.2))
    # streamed or not is not part of the match
    bound = replay.with_tools([get_weather.info()])
    chunks = list(bound.stream([user_message("hi")], ModelOptions(temperature=0.2)))
    assert [chunk.content for chunk in chunks] == ["ok"]


def test_a_call_beyond_the_recording_says_everything_was_replayed(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cassette(ScriptedChatModel(["ok"]), path, mode="record").generate([user_message("hi")])
    replay = cassette(None, path)
    replay.generate([user_message("hi")])
    with pytest.raises(CassetteMismatchError, match="all 1 recorded call.s. were replayed already"):
        replay.generate([user_message("hi")])


def test_fewer_calls_than_recorded_can_be_caught(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel(["a", "b"]), path, mode="record")
    recorder.generate([user_message("1")])
    recorder.generate([user_message("2")])
    replay = cassette(None, path)
    replay.generate([user_message("1")])
    assert replay.unplayed == 1
    with pytest.raises(CassetteError, match=r"1 recorded call\(s\) were never replayed \(call 2\)"):
        replay.assert_all_played()


def test_calls_never_replayed_fail_a_test_as_an_assertion_error(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel(["a", "b"]), path, mode="record")
    recorder.generate([user_message("1")])
    recorder.generate([user_message("2")])
    replay = cassette(None, path)
    replay.generate([user_message("1")])
    with pytest.raises(AssertionError, match=r"were never replayed \(call 2\)") as raised:
        replay.assert_all_played()
    assert isinstance(raised.value, CassetteUnplayedError)
    assert isinstance(raised.value, CassetteError)  # ``except CassetteError`` still catches it


# --- secrets --------------------------------------------------------------------------------

ENV_SECRET = "env-secret-0123456789abcdef"
HEADER_KEY = "sk-header-key-0123456789abcdefXYZ"
OPTION_TOKEN = "opt-token-9876543210"
PASSWORD = "hunter2-correct-horse"
BEARER = "abcdef0123456789bearer"
KEY_IN_REPLY = "sk-proj-REPLY0123456789abcdefghij"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_no_secret_is_ever_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    path = tmp_path / f"secrets{suffix}"

    @tool
    def login(user: str, password: str) -> str:
        """Log in.

        Args:
            user: who.
            password: the password.
        """
        return f"logged in {user}"

    with FakeOpenAIServer() as server:
        server.queue(
            Reply(tool_calls=[call("login", {"user": "ann", "password": PASSWORD}, id="c1")]),
            Reply(f"Your key is {KEY_IN_REPLY}; use Authorization: Bearer {BEARER}"),
        )
        live = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key=HEADER_KEY)
        options = with_chat_model_options(
            extra={"extra_headers": {"Authorization": f"Bearer {BEARER}"}, "api_key": OPTION_TOKEN}
        )
        agent = ChatModelAgent(
            "a", "d", cassette(live, path, mode="record"), tools=[login],
            instruction=f"The service token is {ENV_SECRET}.",
        )
        result = Runner(agent).invoke("Log me in", options)
        # the secrets really were in flight
        assert server.request_headers[0]["authorization"] == f"Bearer {HEADER_KEY}"
        assert server.requests[0]["api_key"] == OPTION_TOKEN
        assert ENV_SECRET in server.requests[0]["messages"][0]["content"]
    assert KEY_IN_REPLY in result.text

    written = path.read_bytes()
    for secret in (ENV_SECRET, HEADER_KEY, OPTION_TOKEN, PASSWORD, BEARER, KEY_IN_REPLY):
        assert secret.encode() not in written, secret
    text = written.decode()
    assert "<redacted:MY_SERVICE_TOKEN>" in text and "Bearer <redacted>" in text

    # The redacted cassette still replays: live requests are redacted before they match.
    replay = ChatModelAgent(
        "a", "d", cassette(None, path), tools=[login], instruction=f"The service token is {ENV_SECRET}."
    )
    again = Runner(replay).invoke("Log me in", options)
    assert again.text == "Your key is <redacted>; use Authorization: Bearer <redacted>"


def test_a_tools_parameter_schema_is_written_whole_and_only_values_are_redacted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"

    @tool
    def login(user: str, password: str, api_key: str = "none") -> str:
        """Log in.

        Args:
            user: who.
            password: the password.
            api_key: a key instead of a password.
        """
        return f"logged in {user}"

    model = ScriptedChatModel(
        [calls_message(call("login", {"user": "ann", "password": PASSWORD}, id="c1")), "In."]
    )
    agent = ChatModelAgent("a", "d", cassette(model, path, mode="record"), tools=[login])
    assert Runner(agent).invoke("Log me in").text == "In."

    written = json.loads(path.read_text(encoding="utf-8"))
    request = written["interactions"][0]["request"]
    schema = request["tools"][0]["parameters"]
    # the schema says what a parameter is: kept whole, whatever the parameter's name ...
    assert schema["required"] == ["user", "password"]
    assert schema["properties"]["password"] == {"type": "string", "description": "the password."}
    # ... but a value in it (the default of a secret-named one) is a value: redacted
    assert schema["properties"]["api_key"] == {
        "type": "string", "description": "a key instead of a password.", "default": "<redacted>"
    }
    assert PASSWORD not in path.read_text(encoding="utf-8")  # the value still is redacted
    again = ChatModelAgent("a", "d", cassette(None, path), tools=[login])
    assert Runner(again).invoke("Log me in").text == "In."


def test_a_scrubber_redacts_more_and_scrubbed_requests_still_match(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"

    def scrub(text: str) -> str:
        return text.replace("ann@example.com", "<email>")

    recorder = cassette(ScriptedChatModel(["Mail sent to ann@example.com"]), path, mode="record", scrub=scrub)
    assert recorder.generate([user_message("mail ann@example.com")]).content == "Mail sent to ann@example.com"
    assert "ann@example.com" not in path.read_text()
    reply = cassette(None, path, scrub=scrub).generate([user_message("mail ann@example.com")])
    assert reply.content == "Mail sent to <email>"
    with pytest.raises(CassetteMismatchError):  # without the scrubber the request differs
        cassette(None, path).generate([user_message("mail ann@example.com")])


def test_a_scrubber_must_return_text(tmp_path: Path) -> None:
    recorder = cassette(ScriptedChatModel(["x"]), tmp_path / "c.json", mode="record", scrub=lambda t: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="scrub function must return a str"):
        recorder.generate([user_message("hi")])


def test_no_committed_cassette_holds_a_secret() -> None:
    root = Path(__file__).resolve().parent.parent
    files = [
        path
        for folder in (root / "samples" / "cassettes", FIXTURES)
        for path in folder.rglob("*")
        if path.suffix in (".json", ".yaml", ".yml")
    ]
    assert len(files) >= 4
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\b(Bearer|Basic) (?!<redacted>)\S", text), path
        assert not re.search(r"\bsk-[A-Za-z0-9_-]{8,}", text), path
        assert not re.search(r"(?i)\"?(authorization|api[_-]?key)\"?: *\"?(?!<redacted>)\w", text), path


# --- modes ----------------------------------------------------------------------------------


def test_record_missing_replays_what_is_recorded_and_records_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cassette(ScriptedChatModel(["first"]), path, mode="record").generate([user_message("1")])
    model = ScriptedChatModel(["second"])
    both = cassette(model, path, mode="record-missing")
    assert both.generate([user_message("1")]).content == "first"
    assert both.generate([user_message("2")]).content == "second"
    assert len(model.calls) == 1 and model.calls[0].messages == [user_message("2")]
    data = json.loads(path.read_text())
    assert [i["reply"]["message"]["content"] for i in data["interactions"]] == ["first", "second"]
    replay = cassette(None, path)
    assert replay.generate([user_message("2")]).content == "second"
    assert replay.generate([user_message("1")]).content == "first"


def test_record_replaces_the_file_with_this_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cassette(ScriptedChatModel(["old"]), path, mode="record").generate([user_message("1")])
    cassette(ScriptedChatModel(["new"]), path, mode="record").generate([user_message("1")])
    data = json.loads(path.read_text())
    assert [i["reply"]["message"]["content"] for i in data["interactions"]] == ["new"]


def test_recording_the_same_calls_twice_writes_the_same_bytes(tmp_path: Path) -> None:
    def record(path: Path) -> bytes:
        model = ScriptedChatModel(
            [calls_message(call("get_weather", {"city": "Paris"}, id="c1")), "Sunny."]
        )
        run_agent(cassette(model, path, mode="record"), streaming=True)
        return path.read_bytes()

    for suffix in (".json", ".yaml"):
        assert record(tmp_path / f"a{suffix}") == record(tmp_path / f"b{suffix}")


def test_failed_calls_are_recorded_and_fail_again_on_replay(tmp_path: Path) -> None:
    path = tmp_path / "errors.json"
    with FakeOpenAIServer() as server:
        server.queue(
            Reply(status=429, error="slow down", retry_after=0),
            Reply("partial answer that breaks", chunks=4, cut_after=2, done=False),
        )
        live = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", max_retries=0)
        recorder = cassette(live, path, mode="record")
        with pytest.raises(RateLimitError) as first:
            recorder.generate([user_message("1")])
        reader = recorder.stream([user_message("2")])
        live_chunks: list[Message] = []
        with pytest.raises(IncompleteStreamError) as second:
            for chunk in reader:
                live_chunks.append(chunk)
    replay = cassette(None, path)
    with pytest.raises(RateLimitError) as again:
        replay.generate([user_message("1")])
    assert again.value.status_code == 429 == first.value.status_code
    assert str(again.value) == str(first.value)
    replayed: list[Message] = []
    reader = replay.stream([user_message("2")])
    with pytest.raises(IncompleteStreamError, match=str(second.value)[:30]):
        for chunk in reader:
            replayed.append(chunk)
    assert replayed == live_chunks and live_chunks


def test_an_error_before_the_first_chunk_is_raised_by_stream_itself(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel([ModelError("boom", status_code=500)]), path, mode="record")
    with pytest.raises(ModelError, match="boom"):
        recorder.stream([user_message("hi")])
    with pytest.raises(ModelError, match="boom") as replayed:
        cassette(None, path).stream([user_message("hi")])
    assert replayed.value.status_code == 500


def test_other_errors_and_abandoned_streams_are_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel([ValueError("a bug"), "whole reply"]), path, mode="record")
    with pytest.raises(ValueError):
        recorder.generate([user_message("1")])
    reader = recorder.stream([user_message("2")])
    reader.recv()
    reader.close()  # read only in part (a cancel): the reply is unknown
    assert not path.exists()


# --- threads --------------------------------------------------------------------------------


class Ordered:
    """Wraps a model; the call for ``second`` waits until the call for ``first`` is answered."""

    def __init__(self, inner: ChatModel, first: str, second: str) -> None:
        self.inner, self.first, self.second = inner, first, second
        self.first_done = threading.Event()
        self.order: list[str] = []

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        name = messages[0].content.removeprefix("You are ").rstrip(".")
        if name == self.second:
            assert self.first_done.wait(GUARD)
        self.order.append(name)
        try:
            return self.inner.generate(messages, options)
        finally:
            if name == self.first:
                self.first_done.set()

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        raise NotImplementedError


def parallel_run(model_for: dict[str, ChatModel]) -> list[tuple[str, str]]:
    branches = [
        ChatModelAgent(name, "d", model_for[name], instruction=f"You are {name}.")
        for name in ("left", "right")
    ]
    agent = ParallelAgent("both", "d", branches)
    with no_thread_leak():
        events = list(Runner(agent).run([user_message("x")]))
    return sorted((e.agent_name, summarize(e)[3]) for e in events if e.output is not None)


def test_calls_from_parallel_branches_replay_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "parallel.json"

    def reply(messages: list[Message]) -> str:
        return f"answer of {messages[0].content}"

    recorder = cassette(ScriptedChatModel(reply), path, mode="record")
    recorded = parallel_run({"left": recorder, "right": recorder})
    assert recorded == [("left", "answer of You are left."), ("right", "answer of You are right.")]

    # Replay twice, forcing opposite orders: right's call first, then left's first.
    for first, second in (("right", "left"), ("left", "right")):
        gated = Ordered(cassette(None, path), first, second)
        assert parallel_run({"left": gated, "right": gated}) == recorded
        assert gated.order == [first, second]


def test_match_by_order_wants_the_recorded_order(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    recorder = cassette(ScriptedChatModel(["a", "b"]), path, mode="record")
    recorder.generate([user_message("1")])
    recorder.generate([user_message("2")])
    by_order = cassette(None, path, match="order")
    with pytest.raises(CassetteMismatchError, match="does not match the next recorded call"):
        by_order.generate([user_message("2")])
    by_request = cassette(None, path)
    assert by_request.generate([user_message("2")]).content == "b"


def test_concurrent_recording_keeps_every_call(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    recorder = cassette(ScriptedChatModel(lambda m: f"echo {m[-1].content}"), path, mode="record")
    start = threading.Barrier(8, timeout=GUARD)
    answers: dict[int, str] = {}

    def worker(number: int) -> None:
        start.wait()
        answers[number] = recorder.generate([user_message(str(number))]).content

    with no_thread_leak():
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
    assert answers == {n: f"echo {n}" for n in range(8)}
    replay = cassette(None, path)
    for number in reversed(range(8)):
        assert replay.generate([user_message(str(number))]).content == f"echo {number}"
    replay.assert_all_played()


def test_a_cancelled_replay_stops_like_a_live_one(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Paris"})), "Sunny."])
    run_agent(cassette(model, path, mode="record"), streaming=True)
    agent = ChatModelAgent("weather", "d", cassette(None, path), instruction="Be brief.", tools=[get_weather])
    handle = CancelHandle()
    handle.cancel()
    events = list(Runner(agent, enable_streaming=True).query("Weather in Paris?", with_cancel(handle)))
    assert isinstance(events[-1].err, AgentCancelledError)


# --- files and arguments --------------------------------------------------------------------


def test_cassettes_written_by_format_version_1_still_replay() -> None:
    # Persisted formats are promises: these files were written by the first version.
    for name in ("v1.json", "v1.yaml"):
        replay = cassette(None, FIXTURES / name)
        events = run_agent(replay, streaming=True)
        assert events[-1][0][3] == "It is sunny in Paris, 21°C.\nEnjoy the day!"
        chunks = events[-1][1]
        assert chunks is not None and len(chunks) > 2
        replay.assert_all_played()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"interactions": []}', "is not an agentkit cassette"),
        ('{"agentkit_cassette": 99, "interactions": []}', "has format version 99"),
        ('{"agentkit_cassette": 1, "interactions": [{"request": {}}]}', "interaction 1 .* is damaged"),
    ],
)
def test_a_damaged_file_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(CassetteError, match=message):
        cassette(None, path)


def test_bad_arguments_are_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="there is no cassette at .* record it first"):
        cassette(None, tmp_path / "missing.json")
    with pytest.raises(ValueError, match="mode must be one of 'record', 'replay', 'record-missing'"):
        cassette(None, tmp_path / "c.json", mode="once")
    with pytest.raises(ValueError, match="match must be one of"):
        cassette(None, tmp_path / "c.json", match="fuzzy")
    with pytest.raises(TypeError, match="needs one .got None."):
        cassette(None, tmp_path / "c.json", mode="record")
    with pytest.raises(ValueError, match="must end in .json or .yaml"):
        cassette(ScriptedChatModel([]), tmp_path / "c.txt", mode="record")
    with pytest.raises(TypeError, match="wraps a ChatModel"):
        cassette("gpt-4o", tmp_path / "c.json", mode="record")  # type: ignore[arg-type]


def test_recording_a_model_without_tools_support_cannot_bind_tools(tmp_path: Path) -> None:
    class Plain:
        def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
            return assistant_message("plain")

        def stream(self, messages: Sequence[Message], options: ModelOptions | None = None) -> StreamReader[Message]:
            raise NotImplementedError

    recorder = cassette(Plain(), tmp_path / "c.json", mode="record")
    assert recorder.generate([user_message("hi")]).content == "plain"
    with pytest.raises(TypeError, match="cannot be bound to tools"):
        recorder.with_tools([ToolInfo("t")])


def test_a_cassette_is_a_tool_calling_chat_model(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    model = cassette(ScriptedChatModel(["x"]), path, mode="record")
    assert isinstance(model, ToolCallingChatModel) and isinstance(model, Cassette)
    bound = model.with_tools([ToolInfo("t")])
    assert isinstance(bound, Cassette) and bound.path == path and bound.mode == "record"
    assert "mode='record'" in repr(model)


# --- round trips ----------------------------------------------------------------------------

any_text = st.text(
    st.characters(exclude_categories=["Cs"]), max_size=30
)  # every character a str can hold, line breaks and controls included


def _plain_extra(message: Message) -> bool:
    return not any(is_secret_key(key) for key in message.extra)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reply=any_message.filter(_plain_extra),
    chunks=st.lists(st.builds(assistant_message, any_text), min_size=1, max_size=4),
    question=any_text,
    suffix=st.sampled_from([".json", ".yaml"]),
)
def test_any_reply_replays_exactly(
    tmp_path: Path, reply: Message, chunks: list[Message], question: str, suffix: str
) -> None:
    assume(not any(s in question + reply.content for s in ("sk-", "Bearer", "Basic", "{", "[")))
    path = tmp_path / f"round{suffix}"
    path.unlink(missing_ok=True)
    asked = [user_message(question)]
    recorder = cassette(ScriptedChatModel([reply]), path, mode="record")
    assert recorder.generate(asked) == reply

    class Chunked(ScriptedChatModel):
        def stream(self, messages: Sequence[Message], options: ModelOptions | None = None) -> StreamReader[Message]:
            self.generate(messages, options)
            return stream_from_list(chunks)

    streamed = cassette(Chunked(["unused"]), path, mode="record-missing")
    assert list(streamed.stream([user_message(question + "!")])) == chunks
    replay = cassette(None, path)
    assert replay.generate(asked) == reply
    assert list(replay.stream([user_message(question + "!")])) == chunks
