"""A "web process" for the Celery tests: submit, read events, resume or cancel, from the CLI.

python celery_client.py events RUN_ID [LAST_EVENT_ID] [--limit N]   # JSON lines
python celery_client.py resume RUN_ID approve|reject [QUEUE]
python celery_client.py cancel RUN_ID

Every call is made as the owner ``OWNER`` (the tests submit their runs as that owner).
"""

from __future__ import annotations

import json
import sys

# Run as a script beside celery_app.py (the module the workers load), not as tests.celery_client.
from celery_app import queue  # type: ignore[import-not-found]

OWNER = "tester"


def main(argv: list[str]) -> None:
    command, run_id = argv[0], argv[1]
    if command == "events":
        last = argv[2] if len(argv) > 2 and argv[2] != "-" else None
        limit = int(argv[3]) if len(argv) > 3 else None
        with queue.events(run_id, last, owner=OWNER) as stream:
            for count, entry in enumerate(stream, 1):
                print(
                    json.dumps({"id": entry.id, "kind": entry.kind, "data": entry.data}), flush=True
                )
                if limit is not None and count >= limit:
                    break
    elif command == "resume":
        approve = argv[2] == "approve"
        targets = {interrupt_id: approve for interrupt_id in queue.interrupts(run_id, owner=OWNER)}
        lane = argv[3] if len(argv) > 3 else None
        after = queue.resume(run_id, targets, owner=OWNER, queue=lane)
        print(json.dumps({"after": after, "targets": targets}))
    elif command == "cancel":
        print(json.dumps({"cancelled": queue.cancel(run_id, owner=OWNER)}))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
