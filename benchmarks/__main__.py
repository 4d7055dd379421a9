"""``python -m benchmarks``: run the comparative suite and write its JSON and Markdown.

Options: ``--quick`` (a smoke run of about 30 s), ``--only NAME[,NAME...]`` (scenarios to run;
``--list`` shows them; ``soak`` runs only when named there), ``--out DIR`` (default
``benchmarks/results/``), ``--markdown FILE`` (also write the table, with the machine's load,
to FILE, e.g. ``benchmarks/RESULTS.md``),
``--profile NAME`` (run agentkit's side of one in-process scenario under cProfile instead, and
print where the time goes).

A scenario whose servers or packages are missing here (``celery-throughput`` needs
redis-server, celery and redis-py; ``sse-fanout`` needs Flask) is refused before anything
runs, with a message saying what to install: the suite never prints made-up rows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks._celery_bench import CELERY_SCENARIOS, celery_unavailable
from benchmarks._decompose import decompose
from benchmarks._durable import durable_steps
from benchmarks._inproc import SCENARIOS, Settings
from benchmarks._native import NATIVE_SCENARIOS
from benchmarks._procs import PROCESS_SCENARIOS, ROOT, port_server
from benchmarks._report import Row, markdown, run_metadata, write_results
from benchmarks._scale import SCALE_SCENARIOS
from benchmarks._sse import SSE_SCENARIOS, sse_unavailable

#: A fixed 32-byte checkpoint key, so results do not depend on the user's key file.
BENCHMARK_CHECKPOINT_KEY = "agentkit-benchmark-key-32-bytes!"

ALL = {
    **SCENARIOS,
    "durable-steps": durable_steps,
    **PROCESS_SCENARIOS,
    "decompose": decompose,
    **SCALE_SCENARIOS,
    **CELERY_SCENARIOS,
    **SSE_SCENARIOS,
    **NATIVE_SCENARIOS,
}

#: Scenarios left out when ``--only`` is not given (run them with ``--only NAME``): ``soak``
#: (100,000 runs in a row) takes longer than the rest of the suite together.
OPT_IN = ("soak",)

#: Scenarios that need more than this checkout: each says why it cannot run here, or None.
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "celery-throughput": celery_unavailable,
    "sse-fanout": sse_unavailable,
}


@contextlib.contextmanager
def loopback_server() -> Iterator[int]:
    """Start the loopback server in its own process; yield its port; stop it on exit."""
    with port_server("benchmarks._server", what="the benchmark server", stop_wait=10) as port:
        yield port


def selected(only: str) -> list[str]:
    """The scenarios to run for ``--only`` (comma-separated; empty: all but :data:`OPT_IN`)."""
    return [name for name in only.split(",") if name] or [
        name for name in ALL if name not in OPT_IN
    ]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="few rounds: a ~30 s smoke run")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--markdown", type=Path, default=None, help="also write the Markdown table to this file"
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--profile", default="", help="profile agentkit's side of a scenario")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the suite; return the process exit status (0 also when budgets are missed)."""
    args = _parse(argv)
    if args.list:
        print("\n".join(f"{name} (only with --only)" if name in OPT_IN else name for name in ALL))
        return 0
    os.environ["AGENTKIT_CHECKPOINT_KEY"] = BENCHMARK_CHECKPOINT_KEY
    if args.profile:
        from benchmarks._profile import profile

        with loopback_server() as port:
            return profile(args.profile, Settings(port, quick=args.quick), args.out)
    names = selected(args.only)
    unknown = [name for name in names if name not in ALL]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; --list shows the names", file=sys.stderr)
        return 2
    refused = [
        reason
        for name in names
        if name in REQUIREMENTS and (reason := REQUIREMENTS[name]()) is not None
    ]
    if refused:
        for reason in refused:
            print(reason, file=sys.stderr)
        print(
            "nothing was run; install what is missing or leave those scenarios out with --only",
            file=sys.stderr,
        )
        return 2
    rows: list[Row] = []
    mode = "quick" if args.quick else "full"
    meta = run_metadata(mode, "rounds per scenario: see each row's n in the JSON")
    with loopback_server() as port:
        settings = Settings(port, quick=args.quick)
        for name in names:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            rows.extend(ALL[name](settings))
    json_path, md_path = write_results(rows, meta, args.out)
    table = markdown(rows, meta)
    print(table)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
        print(f"wrote {args.markdown}", file=sys.stderr)
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
