"""Sphinx configuration of agentkit's documentation.

Build (from the repository root, with ``pip install -e '.[docs]'``)::

    python -m sphinx -W -n --keep-going -b html docs docs/_build/html

``-W -n``: a warning, a broken cross-reference or an undocumented public name fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sphinx.application import Sphinx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import agentkit  # noqa: E402  (after the path is set)

project = "agentkit"
author = "the agentkit authors"
copyright = "the agentkit authors"
release = agentkit.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "apiref",
    "attrs_signatures",
    "inventories",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "README.md"]
nitpicky = True

# -- Markdown ------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# -- API reference -------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_use_rtype = False
napoleon_attr_annotations = True
add_module_names = False
python_use_unqualified_type_names = True
python_display_short_literal_types = True

# -- Links to other projects' documentation --------------------------------------------------------
# The inventories are read from local copies where the machine has them (Debian's python3-doc
# and python-attr-doc packages; CI installs them), else fetched from the sites.
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "attrs": ("https://www.attrs.org/en/stable", None),
    "cattrs": ("https://catt.rs/en/stable", None),
    "flask": ("https://flask.palletsprojects.com/en/stable", None),
    "werkzeug": ("https://werkzeug.palletsprojects.com/en/stable", None),
    "celery": ("https://docs.celeryq.dev/en/stable", None),
}
intersphinx_timeout = 10

# httpx's documentation is built with MkDocs and publishes no inventory, and OpenTelemetry's
# cannot be fetched where CI runs: the few names the reference shows link to their pages.
apiref_external_links = {
    "httpx.Client": "https://www.python-httpx.org/api/#client",
    "httpx.Headers": "https://www.python-httpx.org/api/#headers",
    "httpx.BaseTransport": "https://www.python-httpx.org/advanced/transports/",
    "TracerProvider": "https://opentelemetry-python.readthedocs.io/en/stable/api/trace.html"
    "#opentelemetry.trace.TracerProvider",
    # The Python 3.11 inventory Debian ships documents re.Pattern's members but not the class.
    "re.Pattern": "https://docs.python.org/3/library/re.html#re.Pattern",
    # pytest's types, as the plugin's hooks and fixture name them (no local inventory).
    "_pytest.fixtures.FixtureRequest": "https://docs.pytest.org/en/stable/reference/reference.html"
    "#pytest.FixtureRequest",
    "_pytest.config.argparsing.Parser": "https://docs.pytest.org/en/stable/reference/reference.html"
    "#pytest.Parser",
    "_pytest.config.Config": "https://docs.pytest.org/en/stable/reference/reference.html"
    "#pytest.Config",
}

# Private classes that public signatures show (the types of constructor arguments and fields
# that only agentkit itself fills in). They appear as plain text; any other private class in a
# public signature fails the build, so a new one is a decision, written down here.
apiref_private_types = {
    # AgentRun(...) is built by the framework for each run (agents receive it; they never make one).
    "agentkit._runctx.RunFrame": "AgentRun's frame argument",
    "agentkit._scope.RunScope": "AgentRun's scope argument",
    # RunIterator(steering=...) is given by the Runner: the run's inbox of sent messages.
    "agentkit._steering.Steering": "RunIterator's steering argument (given by the Runner)",
    # with_checkpoint_id(lease=...) takes a checkpoint Lease; the protocol names what it uses.
    "agentkit._options.HeldLease": "with_checkpoint_id's lease (an agentkit.checkpoint.Lease)",
    "agentkit._agent.EventSink": "AgentRun's sink argument",
    # ModelRetryConfig.wrap is called by ChatModelAgent with its own verdict record.
    "agentkit.agents._model_retry.StreamVerdicts": "ModelRetryConfig.wrap's verdicts argument",
    # Type aliases (a Callable and a Literal): the signature shows the alias, its docstring and
    # the argument's description say what it is.
    "agentkit.agents._tool_errors.ToolExceptionHandler": "ChatModelAgent's tool_error_handler",
    "agentkit.prebuilt._deep_tools.TodoStatus": "Todo.status",
    # Made by MCPClient and MCPTool themselves from their public arguments.
    "agentkit.mcp._endpoint.Endpoint": "MCPClient's endpoint (made from its public arguments)",
    "agentkit.mcp._tool.ToolSource": "MCPTool's source (made by MCPClient)",
    # The usage record a run keeps; read through RunOutcome.usage and current_usage().
    "agentkit._observe.UsageLedger": "RunOutcome.usage, current_usage()",
    # Internals of iterators and streams that their signatures name.
    "agentkit.iterators._Pair": "RunIterator's base",
    "agentkit.streams._Channel": "StreamWriter's channel argument",
    "agentkit.tools._function._Decorator": "what tool() returns when given options only",
    # The shared base of the workflow agents (shown as their base class).
    # The value contract of the models (shown as their base class: writes raise, replace()).
    "agentkit._values.BuiltValue": "the models' base: public writes raise, replace() copies",
    "agentkit.agents._workflow_base.WorkflowBase": "SequentialAgent's, ParallelAgent's base",
    # The base of resume data a checkpoint never keeps (shown as ChatModelAgentResumeData's base).
    "agentkit._interrupt.ResumeOnlyData": "ChatModelAgentResumeData's base",
    # A recorded event in saved states (ParallelState, DeterministicTransferState).
    "agentkit._runctx.RecordedEvent": "the events a saved state holds",
    # FailoverChatModel's copies share which model answered last through it.
    "agentkit.models._failover._Preferred": "FailoverChatModel's _preferred argument",
    # The shared base of the text checks of agentkit.evals (shown as their base class).
    "agentkit.evals._checks._Shown": "Contains', Matches' ... base",
    # The shared bases of the HTTP chat models and of the fake model servers (shown as their
    # base class; what they define is documented on each public class).
    "agentkit.models._http._model.HTTPChatModel": "the HTTP chat models' base",
    "agentkit.testing._fake_http.FakeModelServer": "the fake model servers' base",
    # The recording a Cassette works on (made by cassette() from its arguments).
    "agentkit.testing._cassette._Tape": "Cassette's tape argument",
}

# -- HTML ----------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"agentkit {release}"
html_static_path: list[str] = []


# -- The Performance page shows the last full benchmark run --------------------------------------
BENCHMARK_RESULTS = HERE.parent / "benchmarks" / "RESULTS.md"


def _append_benchmark_results(app: Sphinx, docname: str, source: list[str]) -> None:
    """Append ``benchmarks/RESULTS.md`` to the Performance page, when the file exists.

    A full ``python -m benchmarks`` run writes it (the table and the machine's load); it is
    committed with each full run, so the page shows the latest one.
    """
    if docname == "guides/performance" and BENCHMARK_RESULTS.exists():
        table = BENCHMARK_RESULTS.read_text(encoding="utf-8")
        source[0] += "\n\n## The latest full run (`benchmarks/RESULTS.md`)\n\n" + table


def setup(app: Sphinx) -> None:
    """Connect the Performance page's results to the build."""
    app.connect("source-read", _append_benchmark_results)
