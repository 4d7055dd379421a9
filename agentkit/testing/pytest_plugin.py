"""pytest support for cassettes: the ``model_cassette`` fixture and ``--cassette-mode``.

Enable it in your ``conftest.py`` (agentkit does not load it into every pytest run, and
``import agentkit`` never imports pytest)::

    pytest_plugins = ["agentkit.testing.pytest_plugin"]

Then one line per test wraps the model::

    def test_weather_agent(model_cassette):
        model = model_cassette(OpenAIChatModel("gpt-4o-mini"))
        result = Runner(ChatModelAgent("weather", "...", model, tools=[get_weather])).invoke(
            "Weather in Paris?"
        )
        assert "Paris" in result.text

The cassette lives next to the test, in ``cassettes/<test module>/<test name>.json``;
``@pytest.mark.cassette("name.yaml")`` picks another file (relative to the test's folder;
a ``.yaml`` name records YAML), and can set ``mode=``, ``match=``, ``scrub=`` and ``redact=``. Tests
replay by default, offline; record with a real model once::

    OPENAI_API_KEY=... pytest --cassette-mode=record tests/test_weather.py

``--cassette-mode`` (``record``, ``replay``, ``record-missing``) wins over a marker's mode.
A test that wraps two models gives each a name: ``model_cassette(judge, name="judge")``
records to ``<test name>-judge.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.models._base import ChatModel
from agentkit.testing._cassette import MODES, Cassette, cassette

__all__ = ["CassetteFactory", "model_cassette", "pytest_addoption", "pytest_configure"]

_MARKER = "cassette"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--cassette-mode`` to pytest's command line."""
    group = parser.getgroup("agentkit", "agentkit model cassettes")
    group.addoption(
        "--cassette-mode",
        choices=MODES,
        default=None,
        help="record, replay (default) or record-missing: how model_cassette treats the "
        "model's calls",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``cassette`` marker."""
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(path=None, *, mode=None, match=None, scrub=None, redact=()): the cassette "
        "file and settings of the model_cassette fixture in this test",
    )


class CassetteFactory:
    """What the ``model_cassette`` fixture gives a test: call it with a model to wrap it.

    Each call returns a :class:`~agentkit.testing.Cassette` on its own file: the first
    unnamed one on the test's cassette, later ones (or named ones) on files named after it.
    """

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self._path = path
        self._settings = settings
        self._unnamed = 0
        self._names: set[str] = set()

    @property
    def path(self) -> Path:
        """The test's cassette file (the first unnamed cassette's)."""
        return self._path

    def __call__(self, model: ChatModel | None, *, name: str | None = None) -> Cassette:
        """Wrap ``model`` in a cassette of this test (``name`` tells several apart).

        Raises:
            ValueError: ``name`` was used already in this test.
        """
        if name is None:
            self._unnamed += 1
            suffix = "" if self._unnamed == 1 else f"-{self._unnamed}"
        else:
            if name in self._names:
                raise AgentKitValueError(f"this test already has a cassette named {name!r}")
            self._names.add(name)
            suffix = f"-{_safe(name)}"
        path = self._path.with_name(f"{self._path.stem}{suffix}{self._path.suffix}")
        return cassette(model, path, **self._settings)


@pytest.fixture
def model_cassette(request: pytest.FixtureRequest) -> CassetteFactory:
    """Wrap a model in this test's cassette: ``model = model_cassette(real_model)``."""
    marker = request.node.get_closest_marker(_MARKER)
    args: tuple[Any, ...] = marker.args if marker is not None else ()
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    folder = Path(str(request.node.path)).parent
    given = kwargs.pop("path", args[0] if args else None)
    if given is None:
        module = Path(str(request.node.path)).stem
        path = folder / "cassettes" / module / f"{_safe(request.node.name)}.json"
    else:
        path = folder / Path(given)
    option = request.config.getoption("--cassette-mode")
    if option is not None:
        kwargs["mode"] = option
    unknown = set(kwargs) - {"mode", "match", "scrub", "redact"}
    if unknown:
        raise AgentKitTypeError(
            f"@pytest.mark.{_MARKER} takes path, mode, match, scrub and redact (got "
            f"{', '.join(sorted(unknown))})"
        )
    return CassetteFactory(path, kwargs)


def _safe(name: str) -> str:
    """A test name (parametrized ids included) as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "cassette"
