"""A payment that survives a crash: ``tool_call_key()`` as the payment API's Idempotency-Key.

An agent pays an invoice through a payment API (here a small loopback server that behaves like
Stripe's: a ``POST /charges`` with an ``Idempotency-Key`` it has seen returns the first charge
instead of charging again). The ``charge`` tool sends ``tool_call_key()`` as that key: the same
key every time this call runs, also after a crash, and a different one for every other call.
So the tool can be ``idempotent=True``: running it again is harmless.

The run is durable (a checkpoint store and id: ``durability="step"``, the default). A child
process runs it and is killed with SIGKILL right after the API charged the card, before the
tool returned. This process then resumes the run from the store once the dead run's lease
expired: the interrupted call runs again, with the same key, the API answers with the first
charge, and the customer is charged once.

    python samples/payment_idempotency.py

Offline by default (a scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import make_model

from agentkit import (
    ChatModelAgent,
    CheckpointBusyError,
    Message,
    Role,
    Runner,
    tool,
    tool_call_key,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.testing import call, calls_message

LEASE_TTL = 1.0  # seconds the dead run keeps its checkpoint id busy (the default is 30)


# --- the payment API (a stand-in for Stripe, Adyen, ...) ----------------------------------------


class PaymentAPI:
    """Charges cards; a request whose ``Idempotency-Key`` it has seen gets the first charge."""

    def __init__(self) -> None:
        self.charges: list[dict[str, Any]] = []
        self.by_key: dict[str, dict[str, Any]] = {}
        self.requests = 0
        self.lock = threading.Lock()

    def charge(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests += 1
            if not key:
                return 400, {"error": "an Idempotency-Key header is required"}
            if key in self.by_key:
                return 200, {**self.by_key[key], "replayed": True}
            charge = {"id": f"ch_{len(self.charges) + 1}", "amount": body["amount"],
                      "customer": body["customer"]}
            self.charges.append(charge)
            self.by_key[key] = charge
            return 201, charge


@contextmanager
def payment_server(api: PaymentAPI) -> Iterator[str]:
    """Serve ``api`` on a loopback port; yield its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, answer = api.charge(self.headers.get("Idempotency-Key", ""), body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- the agent ----------------------------------------------------------------------------------


def make_charge_tool(api_url: str, crash_after_charge: bool) -> Any:
    @tool(idempotent=True)  # safe to run again: the API sees the same key
    def charge(customer: str, amount_cents: int) -> str:
        """Charge a customer's card on file.

        Args:
            customer: the customer id.
            amount_cents: the amount in cents.
        """
        key = tool_call_key()
        request = urllib.request.Request(
            f"{api_url}/charges",
            data=json.dumps({"customer": customer, "amount": amount_cents}).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        print(f"[pid {os.getpid()}] charge sent with Idempotency-Key {key[:16]}...: "
              f"{answer['id']}{' (replayed by the API)' if answer.get('replayed') else ''}",
              flush=True)
        if crash_after_charge:
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies before the tool returns
        return f"charged {amount_cents} cents to {customer}: {answer['id']}"

    return charge


def scripted_cashier(messages: list[Message]) -> Message:
    """Plays the LLM offline: charge the invoice once, then confirm."""
    results = [m for m in messages if m.role is Role.TOOL]
    if not results:
        return calls_message(call("charge", {"customer": "cus_42", "amount_cents": 1999},
                                  id="charge-1"))
    return Message(Role.ASSISTANT, f"Invoice paid. {results[-1].content}")


def runner_for(store_dir: str, api_url: str, crash_after_charge: bool) -> Runner:
    agent = ChatModelAgent(
        "cashier",
        "pays invoices",
        make_model(scripted_cashier),
        instruction="Pay the invoice with the charge tool, then confirm in one sentence.",
        tools=[make_charge_tool(api_url, crash_after_charge)],
    )
    return Runner(agent, checkpoint_store=FileCheckPointStore(store_dir), lease_ttl=LEASE_TTL)


def child(store_dir: str, api_url: str, checkpoint_id: str) -> None:
    """The first process: starts the run and dies in the middle of the charge."""
    runner = runner_for(store_dir, api_url, crash_after_charge=True)
    runner.invoke("Pay invoice INV-7 (19.99 USD) for customer cus_42.",
                  with_checkpoint_id(checkpoint_id))
    print("the run completed (it was meant to crash)", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("STORE", "API", "ID"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    api = PaymentAPI()
    checkpoint_id = f"invoice-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as store_dir, payment_server(api) as api_url:
        first = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", store_dir, api_url,
             checkpoint_id],
            check=False, text=True, capture_output=True, timeout=120,
        )
        print(first.stdout, end="")
        print(f"the first process died (exit {first.returncode}, SIGKILL is "
              f"{-signal.SIGKILL}); the API has {len(api.charges)} charge(s)")
        runner = runner_for(store_dir, api_url, crash_after_charge=False)
        deadline = time.monotonic() + 60  # a failure guard; the lease expires in LEASE_TTL
        while True:
            try:
                result = runner.resume(checkpoint_id).result()
                break
            except CheckpointBusyError:  # the dead run's lease has not expired yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        print(f"resumed here (pid {os.getpid()}): {result.text}")
    print(f"payment API: {api.requests} requests, {len(api.charges)} charge(s) made")
    return 0 if len(api.charges) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
