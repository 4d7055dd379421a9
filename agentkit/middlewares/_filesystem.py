"""File tools over a backend, ``execute`` over a shell, and offloading of large tool results.

The definitions behind :mod:`agentkit.middlewares.filesystem`, whose docstring documents them.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkit._lazy import present
from agentkit._middleware import AgentContext, AgentMiddleware, ToolInvoke
from agentkit.backends import Backend, BackendError, Shell
from agentkit.backends._offload import offload, offload_path
from agentkit.errors import AgentConfigError
from agentkit.middlewares._file_tools import EXECUTE, FILE_TOOLS, file_tools
from agentkit.middlewares._tool import add_tools
from agentkit.tools._base import BaseTool, ToolCallInfo

__all__ = [
    "EXECUTE",
    "FILE_TOOLS",
    "FilesystemMiddleware",
    "OffloadLargeResults",
    "default_offload_path",
    "file_tools",
]

present([file_tools], "agentkit.middlewares.filesystem")


class FilesystemMiddleware(AgentMiddleware):
    """Gives an agent the file tools over ``backend`` and ``execute`` over ``shell``.

    The tools are added to every run of the agent (``before_agent``); ``instruction``, when
    given, is appended to the agent's instruction after a newline (Eino adds none by
    default). The middleware keeps no state: one instance can serve many agents and runs.

    Args:
        backend: the file backend (``None``: no file tools).
        shell: the shell for ``execute`` (``None``: no ``execute``).
        instruction: text appended to the agent's instruction.

    Raises:
        AgentConfigError: neither a backend nor a shell was given.
    """

    def __init__(
        self, backend: Backend | None = None, *, shell: Shell | None = None, instruction: str = ""
    ) -> None:
        if backend is None and shell is None:
            raise AgentConfigError(
                "FilesystemMiddleware needs a backend (for the file tools), a shell (for "
                "execute), or both"
            )
        if backend is not None and not isinstance(backend, Backend):
            raise AgentConfigError(
                f"backend must be a Backend (ls, read, write, edit, glob, grep); got {backend!r}"
            )
        if shell is not None and not isinstance(shell, Shell):
            raise AgentConfigError(f"shell must be a Shell (with execute); got {shell!r}")
        self._tools = tuple(file_tools(backend, shell))
        self._instruction = instruction

    @property
    def tools(self) -> list[BaseTool]:
        """The tools this middleware adds (a copy)."""
        return list(self._tools)

    def before_agent(self, context: AgentContext) -> None:
        """Add the tools (and the instruction, if any) to the run."""
        if self._instruction:
            context.instruction = f"{context.instruction}\n{self._instruction}"
        add_tools(context, self._tools, type(self).__name__)


class OffloadLargeResults(AgentMiddleware):
    """Writes tool results longer than ``token_limit * 4`` characters to the backend.

    The model gets, instead of the result, where it was written and its first 10 lines (each
    cut to 1,000 characters), and can read the rest with ``read_file`` a part at a time. Every
    tool call of the agent is watched (as Eino's tool middleware). A result that was streamed
    to the caller was shown whole; what the model keeps is the short text. When the backend
    refuses the write (a result over its ``max_file_bytes``, a full disk), the model is told so
    and gets the result itself, which the agent's ``max_tool_result_chars`` then cuts.

    Args:
        backend: where the results are written.
        token_limit: the limit in tokens, counted as 4 characters each (default 20,000).
        path: ``path(call) -> str``, where to write the result of ``call`` (a
            :class:`~agentkit.ToolCallInfo`); default ``large_tool_result/<call id>``.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        token_limit: int = 20_000,
        path: Callable[[ToolCallInfo], str] | None = None,
    ) -> None:
        if not isinstance(backend, Backend):
            raise AgentConfigError(f"backend must be a Backend; got {backend!r}")
        if isinstance(token_limit, bool) or not isinstance(token_limit, int) or token_limit < 1:
            raise AgentConfigError(f"token_limit must be a positive int (got {token_limit!r})")
        self._backend = backend
        self._limit = token_limit * 4
        self._path = path or default_offload_path

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        """Run the call; write a too long result to the backend and return a note instead."""
        result = invoke(call)
        if len(result) <= self._limit:
            return result
        path = self._path(call)
        try:
            return offload(self._backend, path, call.call_id, result)
        except (OSError, BackendError) as error:
            # The model learns why it gets only the beginning (the agent's own limit on tool
            # results then cuts what is returned here).
            return (
                f"Tool result too large ({len(result):,} characters), and it could not be saved "
                f"in the filesystem at {path}: {error}\n\nThe result as it is:\n{result}"
            )


def default_offload_path(call: ToolCallInfo) -> str:
    """``large_tool_result/<call id>`` (characters a file name cannot hold replaced by ``_``)."""
    return offload_path(call.call_id)

present(
    (
        FilesystemMiddleware,
        OffloadLargeResults,
    ),
    "agentkit.middlewares",
)

present(
    (
        default_offload_path,
        file_tools,
    ),
    "agentkit.middlewares.filesystem",
)
