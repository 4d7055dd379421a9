"""A chat model that replies from a script: for tests, examples and offline samples.

:class:`~agentkit.models.ScriptedChatModel` plays back a list of replies (or asks a function
for each one) and records every call, so a test can run real agents on real threads and then
assert on exactly what the model was sent.

``ModelCall``, ``ScriptedChatModel`` moved to :mod:`agentkit.models`; their spellings here
still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.models._scripted import (
    ScriptReply,
    split_message,
)

__all__ = [
    "ScriptReply",
    "split_message",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ModelCall": "agentkit.models.ModelCall",
            "ScriptedChatModel": "agentkit.models.ScriptedChatModel",
        },
    )
