"""Memory of a 20 MB image through a streamed run, a checkpoint and a conversation.

Run: ``python benchmarks/bench_media_rss.py [--mb 20] [--readers 8]``

A user message carries a 20 MB PNG; the scripted model checks that it received the very
part, calls a tool that returns the same image, and answers. The run streams; every event is
read by ``--readers`` readers (stream copies and ``to_dict``); the run is repeated with a
checkpoint (in memory), a conversation (in memory) and both. Printed, for each: the Python
heap the run keeps beyond the image once it is over, and its peak during the run (both from
``tracemalloc``, in MiB), then the process's resident memory (``VmRSS``, ``VmHWM``). Parts are
immutable values shared by reference: the bytes are held once by the messages, events and
readers, whatever their number; a store keeps its own encoding (a checkpoint's pickle while the
run is interrupted, a conversation's JSON records with the bytes in base64).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentkit import (  # noqa: E402
    ChatModelAgent,
    ImagePart,
    Message,
    Role,
    Runner,
    tool,
    with_checkpoint_id,
    with_conversation_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore  # noqa: E402
from agentkit.conversation import InMemoryConversationStore  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from agentkit.schema import PartLimits, set_part_limits  # noqa: E402
from agentkit.testing import call, calls_message  # noqa: E402
from tests.media_samples import png  # noqa: E402

MiB = 1024 * 1024


def status(field: str) -> float:  # Linux only
    """A ``/proc/self/status`` memory field in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_once(image: ImagePart, readers: int, checkpoint: bool, conversation: bool) -> None:
    """One streamed run of a turn that sends ``image`` and gets it back from a tool."""

    @tool
    def zoom() -> ImagePart:
        """Zoom into the picture."""
        return image

    def script(messages: list[Message]) -> Message:
        question = messages[-3] if messages[-1].role is Role.TOOL else messages[-1]
        assert question.parts[1] is image, "the model did not receive the very part"
        if messages[-1].role is Role.TOOL:
            assert messages[-1].parts[0] is image
            return Message(Role.ASSISTANT, "A red pixel, zoomed.")
        return calls_message(call("zoom", {}))

    agent = ChatModelAgent("describer", "describes", ScriptedChatModel(script), tools=[zoom])
    size = len(image.data or b"")
    conversations = InMemoryConversationStore(max_record_bytes=size * 2 + 8 * MiB)
    runner = Runner(
        agent,
        enable_streaming=True,
        checkpoint_store=InMemoryCheckPointStore() if checkpoint else None,
        conversation_store=conversations if conversation else None,
    )
    options = []
    if checkpoint:
        options.append(with_checkpoint_id("media-run"))
    if conversation:
        options.append(with_conversation_id("media-conversation"))
    held = []
    with runner.query(["What is in this picture?", image], *options) as events:
        for event in events:
            held.append(event)
            variant = event.output.message_output if event.output else None
            if variant is None:
                continue
            for _ in range(readers):
                if variant.is_streaming:
                    for _chunk in variant.open_stream():
                        pass
                event.to_dict()
    if conversation:
        assert conversations.load("media-conversation")[0].parts[1] == image


def measure(megabytes: int, readers: int) -> list[tuple[str, float, float]]:
    """``(what, retained MiB, peak MiB)`` over the image, for each way of running."""
    set_part_limits(PartLimits(max_part_bytes=(megabytes + 8) * MiB))
    image = ImagePart(png(padding=megabytes * MiB))
    rows = []
    tracemalloc.start()
    for what, checkpoint, conversation in (
        ("streamed run", False, False),
        ("+ checkpoint", True, False),
        ("+ conversation", False, True),
        ("+ both", True, True),
    ):
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run_once(image, readers, checkpoint, conversation)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        rows.append((what, (current - base) / MiB, (peak - base) / MiB))
    tracemalloc.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=20, help="image size in MiB")
    parser.add_argument("--readers", type=int, default=8, help="readers per event")
    options = parser.parse_args()
    before = status("VmRSS")
    rows = measure(options.mb, options.readers)
    print(f"a {options.mb} MiB image, {options.readers} readers per event (Python heap, MiB):")
    print(f"{'':>16} {'retained':>9} {'peak':>9}")
    for what, retained, peak in rows:
        print(f"{what:>16} {retained:9.1f} {peak:9.1f}")
    print(
        f"process RSS: {before:.1f} MiB before, {status('VmRSS'):.1f} MiB after, "
        f"peak {status('VmHWM'):.1f} MiB"
    )


if __name__ == "__main__":
    main()
