"""samples/payment_idempotency.py: a run killed with SIGKILL in the middle of a payment is
resumed by another process, and the payment API charges once (offline, real processes)."""

from __future__ import annotations

import re

from tests.samples_support import run_sample


def test_a_payment_cut_short_by_sigkill_is_charged_once() -> None:
    done = run_sample("payment_idempotency.py")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    sent = re.findall(r"\[pid (\d+)\] charge sent with Idempotency-Key (\w+)\.\.\.: (ch_\d+)", out)
    assert len(sent) == 2, out
    (first_pid, first_key, first_charge), (second_pid, second_key, second_charge) = sent
    assert first_pid != second_pid  # the call ran again in the resuming process ...
    assert first_key == second_key  # ... with the same key ...
    assert first_charge == second_charge == "ch_1"  # ... so the API gave back the first charge
    assert "(replayed by the API)" in out
    assert "the first process died (exit -9" in out
    assert "resumed here" in out and "Invoice paid." in out
    assert out.rstrip().endswith("payment API: 2 requests, 1 charge(s) made")
