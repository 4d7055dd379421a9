"""The sample app's page in headless Chromium: an approval clicked the instant it appears is
accepted (runs on a real Celery worker), and a refused approval never leaves the page stuck."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkit.integrations.runs import LocalRuns, RunStateError
from tests.redis_server import redis_url  # noqa: F401
from tests.sample_celery import GUARD, sample_on_celery, serving
from tests.test_browser import ANSWER, browser  # noqa: F401  (the fixture)

# Clicks the approve button the moment the page adds it (a MutationObserver).
CLICK_AT_ONCE = """
new MutationObserver(() => {
  const button = document.querySelector(".approval button.approve:not([data-clicked])");
  if (button && !button.disabled) { button.dataset.clicked = "1"; button.click(); }
}).observe(document.getElementById("transcript"), { childList: true, subtree: true });
"""


def ask(browser: Any, url: str, text: str) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(url + "/")
    box = browser.find_element(By.ID, "message")
    box.clear()
    box.send_keys(text)
    browser.find_element(By.ID, "send").click()


def test_the_page_approves_the_instant_the_approval_appears_on_celery(
    browser: Any,  # noqa: F811
    redis_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with sample_on_celery(redis_url, tmp_path, monkeypatch) as url:
        browser.get(url + "/")
        browser.execute_script(CLICK_AT_ONCE)
        box = browser.find_element(By.ID, "message")
        box.clear()
        box.send_keys("Plan a weekend in Lisbon")
        browser.find_element(By.ID, "send").click()
        WebDriverWait(browser, GUARD, poll_frequency=0.05).until(
            lambda d: d.find_element(By.ID, "answer").text == ANSWER
        )
        transcript = browser.find_element(By.ID, "transcript").text
    assert browser.find_element(By.ID, "status").text == "completed"
    assert "book_hotel returned: booked 2 nights in Lisbon" in transcript
    assert browser.find_elements(By.CSS_SELECTOR, ".line.error") == []  # accepted at once


class RefusingRuns(LocalRuns):
    """In-process runs whose first ``refusals`` resumes are refused (as a busy backend)."""

    def __init__(self, refusals: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusals = refusals
        self.asked = 0

    def resume(self, run_id: str, targets: Any = None, *, owner: str | None) -> str | None:
        self.asked += 1
        if self.asked <= self.refusals:
            raise RunStateError(f"run {run_id!r} is busy; try again")
        return super().resume(run_id, targets, owner=owner)


@pytest.mark.parametrize("refusals", [2, 6])
def test_a_refused_approval_is_tried_again_and_never_leaves_the_page_stuck(
    browser: Any, refusals: int, tmp_path: Path  # noqa: F811
) -> None:
    from flask_app import create_app
    from flask_app.agents import AGENT_NAME, build_agent
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from agentkit import Runner
    from agentkit.checkpoint import FileCheckPointStore

    runner = Runner(
        build_agent(), enable_streaming=True, checkpoint_store=FileCheckPointStore(tmp_path)
    )
    runs = RefusingRuns(refusals, {AGENT_NAME: runner})
    with runs, serving(create_app(runs)) as url:
        wait = WebDriverWait(browser, GUARD, poll_frequency=0.05)
        ask(browser, url, "Plan a weekend in Lisbon")
        approve = wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".approval button.approve")
        )[0]
        approve.click()
        if refusals > 4:
            # Five refusals in a row: the page says so and the buttons work again.
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".line.error"))
            assert "is busy; try again" in browser.find_element(By.ID, "transcript").text
            wait.until(lambda d: approve.is_enabled())
            approve.click()  # the user tries again
        wait.until(lambda d: d.find_element(By.ID, "answer").text == ANSWER)
        assert browser.find_element(By.ID, "status").text == "completed"
