"""Cassettes never write a secret, in whatever message it travels (issue 49, A12).

Each form below was written to a cassette before: in the user's text, in a tool's result and in
the model's reply. A recording is made with the scripted model over a real agent run (tool
calls and all); the file is then read as bytes, and replayed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import ChatModelAgent, Runner, tool, user_message
from agentkit.errors import AgentKitValueError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, cassette
from agentkit.testing._redact import Redactor

PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
)
# One of each form (the name says which); each is what a user pastes, a tool reads from a file
# or a model repeats.
SECRETS = {
    "stripe": "sk_live_51HfkQ2EXAMPLEa1b2c3d4e5f6g7h8i9j0",
    "jwt": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFubiJ9"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    ),
    "gitlab": "glpat-Zx81bK2mQ9vT4wY7nR3c",
    "pem": PEM_BODY,
    "password": "hunter2-Correct",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "pasted_token": "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99",
    "openai": "sk-proj-EXAMPLE0123456789abcdefghij",
}
TEXTS = {
    "stripe": f"Charge it with {SECRETS['stripe']} please.",
    "jwt": f"The session cookie was {SECRETS['jwt']}",
    "gitlab": f"git clone https://oauth2:{SECRETS['gitlab']}@gitlab.example.com/a/b.git",
    "pem": f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----\n",
    "password": f"db:\n  user: app\n  password: {SECRETS['password']}\n",
    "aws_secret": f"[default]\naws_secret_access_key = {SECRETS['aws_secret']}\n",
    "pasted_token": f"Here is the token I was given: {SECRETS['pasted_token']}",
    "openai": f"OPENAI key {SECRETS['openai']}",
}


def _record(path: Path, text: str) -> str:
    """Record a run where ``text`` is the user's message, a tool's result and the reply."""

    @tool
    def read_notes() -> str:
        """Read the notes."""
        return text

    model = ScriptedChatModel([calls_message(call("read_notes", {}, id="c1")), text])
    agent = ChatModelAgent("a", "d", cassette(model, path, mode="record"), tools=[read_notes])
    assert Runner(agent).invoke(text).text == text  # the run itself sees the secret
    replay = ChatModelAgent("a", "d", cassette(None, path), tools=[read_notes])
    return Runner(replay).invoke(text).text


@pytest.mark.parametrize("form", sorted(SECRETS))
def test_a_secret_in_user_text_a_tool_result_or_a_reply_is_never_written(
    tmp_path: Path, form: str
) -> None:
    path = tmp_path / "c.json"
    replayed = _record(path, TEXTS[form])
    written = path.read_text(encoding="utf-8")
    for line in SECRETS[form].splitlines():
        assert line not in written, (form, line)
    assert "<redacted>" in written
    assert SECRETS[form].splitlines()[0] not in replayed  # what a replay answers is redacted


def test_the_words_around_a_secret_are_kept() -> None:
    redactor = Redactor()
    assert redactor.text(TEXTS["password"]) == "db:\n  user: app\n  password: <redacted>\n"
    assert redactor.text(TEXTS["aws_secret"]) == "[default]\naws_secret_access_key = <redacted>\n"
    assert redactor.text(TEXTS["pem"]) == (
        "-----BEGIN RSA PRIVATE KEY-----\n<redacted>\n-----END RSA PRIVATE KEY-----\n"
    )
    assert redactor.text(TEXTS["stripe"]) == "Charge it with <redacted> please."


@pytest.mark.parametrize("form", sorted(SECRETS))
def test_redacting_twice_changes_nothing_more(form: str) -> None:
    # a replayed reply, already redacted, comes back in the next request: it must match
    redactor = Redactor()
    once = redactor.text(TEXTS[form])
    assert redactor.text(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "The tool used 12345 tokens; max_tokens: 4096",
        "Your password is wrong, try again.",
        "commit 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a",
        "author: Jane Doe",
        "The token is valid until tomorrow.",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor().text(text) == text


def test_a_user_adds_patterns_whole_matches_or_the_secret_group(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    patterns: list[str | re.Pattern[str]] = [
        r"ACME-[0-9]{6}",
        re.compile(r"pin (?P<secret>\d{4})"),
    ]
    model = ScriptedChatModel(["Card ACME-123456 has pin 4321."])
    recorder = cassette(model, path, mode="record", redact=patterns)
    recorder.generate([user_message("my card is ACME-123456, pin 4321")])
    written = path.read_text(encoding="utf-8")
    assert "123456" not in written and "4321" not in written
    assert "Card <redacted> has pin <redacted>." in written
    # the same patterns redact the live request before it is matched
    reply = cassette(None, path, redact=patterns).generate(
        [user_message("my card is ACME-123456, pin 4321")]
    )
    assert reply.content == "Card <redacted> has pin <redacted>."


def test_a_pattern_that_is_not_a_regex_is_refused() -> None:
    with pytest.raises(AgentKitValueError, match=r"redact=\[.*'\(unclosed'.*not a regular expression"):
        cassette(None, "c.json", redact=["(unclosed"])
    with pytest.raises(TypeError, match="redact takes regular expressions"):
        cassette(None, "c.json", redact="ACME-[0-9]+")


PIECES = [*TEXTS.values(), "password: ", "token is ", "api_key=", " ", "\n", "'", '"', "abc123def456",
          "<redacted>", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "eyJ", "."]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=12))
def test_redaction_is_idempotent_on_any_mix_of_secrets_and_text(pieces: list[str]) -> None:
    # replays match only if a redacted request redacts to itself
    redactor = Redactor()
    once = redactor.text("".join(pieces))
    assert redactor.text(once) == once
