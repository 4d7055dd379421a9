"""samples/steered_run.py: a message sent while the agent works changes what it does."""

from __future__ import annotations

from tests.samples_support import run_sample


def test_the_message_sent_mid_run_reaches_the_agent_before_it_answers() -> None:
    done = run_sample("steered_run.py")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "you> Also check March, please.   (sent while the agent works)" in out
    assert out.index("check_invoices returned: February") < out.index('{"month": "March"}')
    assert "Checked February, March." in out
    assert "not used" not in out
