"""A 20 MB image is held once: events, readers and the run's messages share the part, and a
checkpoint stores it once."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from agentkit import ImagePart
from agentkit.schema import PartLimits, set_part_limits
from benchmarks.bench_media_rss import run_once
from tests.media_samples import png

MiB = 1024 * 1024


def test_a_20_mb_image_through_a_streamed_run_with_eight_readers_per_event_is_not_copied() -> None:
    previous = set_part_limits(PartLimits(max_part_bytes=30 * MiB))
    try:
        image = ImagePart(png(padding=20 * MiB))
        tracemalloc.start()
        try:
            gc.collect()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            run_once(image, readers=8, checkpoint=False, conversation=False)
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        set_part_limits(previous)
    # One copy of the image would be 20 MiB: the run, its events and 8 readers per event
    # together stay far below that.
    assert (peak - base) < 4 * MiB, f"the run's peak was {(peak - base) / MiB:.1f} MiB"
    assert (current - base) < 2 * MiB, f"the run kept {(current - base) / MiB:.1f} MiB"


def test_a_checkpoint_holds_an_image_once_however_many_messages_share_it(
    tmp_path: Path,
) -> None:
    from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
    from agentkit.checkpoint import FileCheckPointStore
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    previous = set_part_limits(PartLimits(max_part_bytes=30 * MiB))
    try:
        image = ImagePart(png(padding=20 * MiB))
    finally:
        set_part_limits(previous)

    @tool
    def look() -> ImagePart:
        """Look at the picture again."""
        return image

    @tool
    def ask() -> str:
        """Ask a human."""
        return "yes" if interrupt("Go on?") else "no"

    model = ScriptedChatModel(
        [
            calls_message(call("look", {})),
            calls_message(call("look", {})),
            calls_message(call("ask", {})),
        ]
    )
    agent = ChatModelAgent("viewer", "looks", model, tools=[look, ask])
    runner = Runner(agent, checkpoint_store=FileCheckPointStore(tmp_path))
    events = list(runner.query(["What is this?", image], with_checkpoint_id("c")))
    assert events[-1].action is not None and events[-1].action.interrupted is not None
    # The user's message and two tool results hold the same part: saved once.
    stored = sum(path.stat().st_size for path in tmp_path.rglob("*") if path.is_file())
    assert 20 * MiB < stored < 21 * MiB, f"the checkpoint files take {stored / MiB:.1f} MiB"
