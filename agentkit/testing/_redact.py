"""What a cassette never writes: API keys, bearer tokens, passwords (the built-in redaction).

Every string and every mapping of a cassette record passes through :class:`Redactor` before
it is written, and every live request passes through the same redactor before it is compared
with a recorded one, so a redacted value still matches. The built-in rules:

* a value under a secret-looking key (``Authorization``, ``api_key``, ``x-api-key``,
  ``password``, ``cookie``, ``access_token``, ...; case, ``-`` and ``_`` ignored) becomes
  ``"<redacted>"``, whatever it is;
* ``Bearer <token>`` and ``Basic <token>`` in any string keep the scheme and lose the token;
* strings shaped like well-known credentials become ``<redacted>``: API keys and tokens
  (OpenAI/Anthropic ``sk-...``, Stripe ``sk_live_...``/``rk_live_...``/``whsec_...``, Google
  ``AIza...`` and ``ya29.``, GitHub ``ghp_...``/``github_pat_...``, GitLab ``glpat-...``, AWS
  ``AKIA...``, Slack ``xox?-...``, Hugging Face ``hf_...``, npm ``npm_...``, PyPI
  ``pypi-...``, SendGrid ``SG....``), JSON Web Tokens (``eyJ...``.``eyJ...``.sig) and the
  body of a PEM private key (its ``BEGIN``/``END`` lines are kept);
* a value assigned to a secret-looking name in text (``password: ...``, ``DB_PASSWORD=...``,
  ``aws_secret_access_key = ...``, ``my token is ...``, ``"api_key": "..."``) becomes
  ``<redacted>``, the name kept. A password-like name (``password``, ``passwd``, ``pwd``,
  ``passphrase``) followed by ``:`` or ``=`` hides any value of 4 characters or more; other
  names (``secret``, ``token``, ``api key``, ``access key``, ``private key``,
  ``credential``), and ``is``/``was`` in prose, hide a value of 8 characters or more that
  mixes letters and digits (neither ``max_tokens: 4096`` nor "the password is wrong" is a
  secret);
* a string that is a JSON object or array with such a key (tool-call arguments such as
  ``{"password": "..."}``) is parsed, redacted the same way and written back as JSON;
* a tool's parameters are a JSON Schema, whose keys name parameters and hold no values: a
  parameter named ``password`` keeps its schema, and only the values a schema may carry
  (``default``, ``const``, ``enum``, ``examples``) are redacted, whole under a secret-looking
  parameter name, by the rules above elsewhere;
* the value of every environment variable whose name says it holds a secret (it contains
  ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` or ``PASSWD``, such as ``OPENAI_API_KEY``) becomes
  ``<redacted:NAME>`` wherever it appears (values shorter than 8 characters are left alone:
  too likely to be ordinary text).

The shapes follow the formats their issuers publish, as collected by the gitleaks and
detect-secrets rule sets; detect-secrets itself is not used, because it reports where a secret
is in source code, not what to cut out of free text: it keeps a GitLab token's tail, a JWT's
signature and a PEM key's body, and finds no ``password: ...`` outside quotes.

Patterns a user adds (``cassette(..., redact=[...])``) then run: a match becomes
``<redacted>``, or only its group named ``secret`` when it has one. A user scrubber
(``cassette(..., scrub=fn)``, ``fn(text) -> text``) runs last, on every string.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentkit.errors import AgentKitTypeError, AgentKitValueError

REDACTED = "<redacted>"

_SECRET_KEYS = frozenset(
    {
        "authorization",
        "proxyauthorization",
        "apikey",
        "xapikey",
        "openaiapikey",
        "apitoken",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "bearertoken",
        "clientsecret",
        "secret",
        "secretkey",
        "password",
        "passwd",
        "cookie",
        "setcookie",
        "xgoogapikey",
        "ocpapimsubscriptionkey",
    }
)

_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{6,}")
_KEY_SHAPES = re.compile(
    r"\b(?:"
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic (sk-ant-...), DeepSeek, ...
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"  # Stripe secret and restricted keys
    r"|whsec_[0-9A-Za-z]{24,}"  # Stripe webhook signing secret
    r"|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[0-9A-Za-z_\-]{20,}"  # GitLab
    r"|npm_[A-Za-z0-9]{36}"  # npm
    r"|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"  # PyPI
    r"|SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"  # SendGrid
    r"|ya29\.[0-9A-Za-z_\-]{20,}"  # Google OAuth access token
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"  # JWT (signed or not)
    r")"
)
# A PEM private key: the body between its BEGIN and END lines (or the end of a cut text).
_PRIVATE_KEY = re.compile(
    r"(?P<begin>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)"
    r"(?P<body>[\s\S]*?)"
    r"(?P<end>-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
# A value given to a secret-looking name: ``password: x``, ``API_KEY=x``, ``token is x``. The
# name is matched from its keyword on (no open-ended prefix: linear on long words).
_ASSIGNED = re.compile(
    r"(?i:(?P<password>pass(?:word|wd|phrase)|pwd)"
    r"|secret|token|api[_\- ]?key|access[_\- ]?key|private[_\- ]?key|credential)"
    r"(?:[^\n:=\"']{0,30}?[\"']?\s{0,8}[:=]\s{0,8}"
    r"|[A-Za-z0-9_.\-]{0,30}\s{1,8}(?P<prose>(?i:is|was))\s{1,8})"
    r"(?:[\"'](?P<quoted>[^\"'\s<]{4,200})[\"']|(?P<bare>[^\s\"'<,;]{4,200}))"
)
_JSON_KEY = re.compile(r'"([A-Za-z0-9_\-]{3,40})"\s*:')
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_MIN_SECRET_LENGTH = 8
_SCHEMA_VALUES = frozenset({"default", "const", "enum", "examples"})  # values inside a schema
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})

Scrub = Callable[[str], str]
"""A user scrubber: ``scrub(text) -> text``, run on every string of a cassette record."""


def is_secret_key(key: str) -> bool:
    """``True`` for a mapping key whose value is a credential (``Authorization``, ``api_key``)."""
    return key.lower().replace("-", "").replace("_", "") in _SECRET_KEYS


def secret_environment(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of the environment variables that hold secrets, longest value first."""
    source = os.environ if environ is None else environ
    found = [
        (name, value)
        for name, value in source.items()
        if _SECRET_ENV_NAME.search(name) and len(value) >= _MIN_SECRET_LENGTH
    ]
    return sorted(found, key=lambda item: (-len(item[1]), item[0]))


def _assigned(match: re.Match[str]) -> str:
    """``match`` of :data:`_ASSIGNED` with its value redacted, when the value looks secret."""
    group = "quoted" if match.group("quoted") is not None else "bare"
    value = match.group(group)
    if (match.group("password") is None or match.group("prose") is not None) and not (
        len(value) >= 8
        and any(char.isdigit() for char in value)
        and any(char.isalpha() for char in value)
    ):
        return match.group()
    start, end = match.span(group)
    offset = match.start()
    text = match.group()
    return text[: start - offset] + REDACTED + text[end - offset :]


def _private_key(match: re.Match[str]) -> str:
    body = match.group("body")
    if not body.strip() or body.strip() == REDACTED:
        return match.group()
    return f"{match.group('begin')}\n{REDACTED}\n{match.group('end')}"


def user_patterns(patterns: Iterable[str | re.Pattern[str]]) -> tuple[re.Pattern[str], ...]:
    """Validate ``cassette(redact=...)``: regular expressions (strings or compiled).

    Raises:
        TypeError: ``patterns`` is one string, or holds something else than a regex.
        ValueError: a string is not a regular expression.
    """
    if isinstance(patterns, (str, bytes, re.Pattern)):
        raise AgentKitTypeError(
            f"redact takes regular expressions, a list of them, not one (got {patterns!r}); "
            f"write redact=[{patterns!r}]"
        )
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        if isinstance(pattern, re.Pattern):
            if not isinstance(pattern.pattern, str):
                raise AgentKitTypeError(
                    f"redact=[{pattern!r}]: a pattern must match text (str), not bytes"
                )
            compiled.append(pattern)
        elif isinstance(pattern, str):
            try:
                compiled.append(re.compile(pattern))
            except re.error as error:
                raise AgentKitValueError(
                    f"redact=[{pattern!r}]: {pattern!r} is not a regular expression ({error}); "
                    "escape it with re.escape() to redact the text as it is"
                ) from None
        else:
            raise AgentKitTypeError(
                f"redact takes regular expressions (str or re.Pattern), got "
                f"{type(pattern).__name__} {pattern!r}"
            )
    return tuple(compiled)


def _user_match(match: re.Match[str]) -> str:
    """A user pattern's ``match`` with its ``secret`` group (else all of it) redacted."""
    if "secret" not in match.re.groupindex or match.group("secret") is None:
        return REDACTED
    start, end = match.span("secret")
    offset = match.start()
    text = match.group()
    return text[: start - offset] + REDACTED + text[end - offset :]


class Redactor:
    """Applies the built-in redaction, the user's patterns, then the user's scrubber, to
    JSON-like data.

    Made once per cassette: the secret environment values are read when it is made.
    """

    __slots__ = ("_patterns", "_scrub", "_secrets")

    def __init__(
        self,
        scrub: Scrub | None = None,
        environ: Mapping[str, str] | None = None,
        patterns: Iterable[str | re.Pattern[str]] = (),
    ):
        if scrub is not None and not callable(scrub):
            raise AgentKitTypeError(
                f"scrub must be a function of a string returning a string (got {scrub!r})"
            )
        self._scrub = scrub
        self._secrets = secret_environment(environ)
        self._patterns = user_patterns(patterns)

    def text(self, value: str) -> str:
        """``value`` with every secret in it replaced, then scrubbed."""
        value = self._builtin(value)
        if self._scrub is not None:
            scrubbed = self._scrub(value)
            if not isinstance(scrubbed, str):
                raise AgentKitTypeError(
                    f"the cassette's scrub function must return a str (got "
                    f"{type(scrubbed).__name__} for {value[:40]!r})"
                )
            value = scrubbed
        return value

    def data(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` (dicts, lists, scalars) with every secret removed."""
        return self._walk(value, self.text)

    def request(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of a call's request record with every secret removed (see :meth:`schema`
        for its tools' parameters)."""
        return {
            key: self._tools(item) if key == "tools" else self.data(item)
            for key, item in record.items()
        }

    def schema(self, value: Any) -> Any:
        """A copy of a JSON Schema with every secret value removed, its structure kept.

        The keys of a schema are keywords and parameter names, never values: none is taken
        for a credential key. Its strings are redacted as any text; the values it carries
        (``default``, ``const``, ``enum``, ``examples``) as data, and whole under a
        secret-looking parameter name (the default of ``password``).
        """
        return self._schema(value, secret=False)

    def _tools(self, tools: Any) -> Any:
        if not isinstance(tools, list):
            return self.data(tools)
        return [
            {
                key: self.schema(item) if key == "parameters" else self.data(item)
                for key, item in entry.items()
            }
            if isinstance(entry, dict)
            else self.data(entry)
            for entry in tools
        ]

    def _schema(self, value: Any, *, secret: bool) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._schema(item, secret=secret) for item in value]
        if not isinstance(value, dict):
            return value
        copy: dict[Any, Any] = {}
        for key, item in value.items():
            if key in _SCHEMA_VALUES:
                copy[key] = REDACTED if secret else self.data(item)
            elif key in _SCHEMA_MAPS and isinstance(item, dict):
                copy[key] = {
                    name: self._schema(
                        sub, secret=key.endswith("roperties") and is_secret_key(str(name))
                    )
                    for name, sub in item.items()
                }
            else:
                copy[key] = self._schema(item, secret=secret)
        return copy

    def _builtin(self, value: str) -> str:
        if value.lstrip()[:1] in ("{", "["):
            value = self._json_text(value)
        for name, secret in self._secrets:
            if secret in value:
                value = value.replace(secret, f"<redacted:{name}>")
        value = _AUTH_SCHEME.sub(lambda match: f"{match.group(1)} {REDACTED}", value)
        if "PRIVATE KEY" in value:
            value = _PRIVATE_KEY.sub(_private_key, value)
        value = _KEY_SHAPES.sub(REDACTED, value)
        value = _ASSIGNED.sub(_assigned, value)
        for pattern in self._patterns:
            value = pattern.sub(_user_match, value)
        return value

    def _json_text(self, value: str) -> str:
        """A JSON text with secret keys, redacted and re-encoded; any other text as it is."""
        if not any(is_secret_key(key) for key in _JSON_KEY.findall(value)):
            return value
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return json.dumps(self._walk(parsed, self._builtin), ensure_ascii=False)

    @classmethod
    def _walk(cls, value: Any, text: Callable[[str], str]) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {
                key: REDACTED if is_secret_key(str(key)) else cls._walk(item, text)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [cls._walk(item, text) for item in value]
        return value
