"""The sample app's page in a real headless Chromium (selenium): send a message, watch the
answer stream in, approve the booking, see the final answer. Screenshots go to the test's
temporary directory.

Skipped when Chromium or its driver is missing, unless ``AGENTKIT_REQUIRE_BROWSER`` is set
(``.ci/run`` installs Debian's ``chromium`` and ``chromium-driver`` and sets it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "samples"))

from flask_app import create_app, local_runs  # noqa: E402
from flask_app.agents import AGENT_NAME  # noqa: E402

from agentkit import ChatModelAgent, Runner, tool  # noqa: E402
from agentkit.checkpoint import InMemoryCheckPointStore  # noqa: E402
from agentkit.integrations.runs import LocalRuns  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from agentkit.testing import call, calls_message  # noqa: E402

REQUIRE_ENV = "AGENTKIT_REQUIRE_BROWSER"
GUARD = 60  # seconds: a failure guard for each wait
ANSWER = "All set: booked 2 nights in Lisbon, reference HTL-3689. Enjoy Lisbon!"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1000,900",
]


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _find(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, driven by selenium."""
    binary = _find("chromium", "chromium-browser")
    driver_path = _find("chromedriver", "chromium-driver")
    if binary is None or driver_path is None:
        message = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        if _required():
            pytest.fail(f"{message}; {REQUIRE_ENV} is set")
        pytest.skip(message)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if _required():
            pytest.fail(f"selenium is not installed; {REQUIRE_ENV} is set")
        pytest.skip("selenium is not installed: pip install 'agentkit[test]'")
    monkeypatch.setenv("SE_OFFLINE", "true")  # never let Selenium Manager download anything
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a real loopback WSGI server."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(GUARD)


@pytest.fixture
def app_url() -> Iterator[str]:
    """The sample app (in-process runs) on a real loopback WSGI server."""
    with local_runs() as runs, serving(create_app(runs)) as url:
        yield url


def test_page_streams_the_answer_and_approves_the_booking(
    browser: Any, app_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, GUARD)
    browser.get(app_url + "/")
    box = browser.find_element(By.ID, "message")
    box.clear()
    box.send_keys("Plan a weekend in Lisbon")
    browser.find_element(By.ID, "send").click()

    approve = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".approval button.approve"))[0]
    transcript = browser.find_element(By.ID, "transcript").text
    assert "Let me check the weather in Lisbon." in transcript
    assert "It is 19°C and clear in Lisbon. I will book a hotel for you." in transcript
    assert "concierge transfers to travel" in transcript
    assert 'travel calls get_weather({"city": "Lisbon"})' in transcript
    assert "get_weather returned: 19°C and clear" in transcript
    assert "Book a hotel in Lisbon for 2 nights (120 EUR a night)?" in transcript
    assert browser.execute_script("return window.agentkit.tokens") >= 6  # streamed, chunk by chunk
    browser.save_screenshot(str(tmp_path / "approval.png"))

    approve.click()
    wait.until(lambda d: d.find_element(By.ID, "answer").text == ANSWER)
    assert browser.find_element(By.ID, "status").text == "completed"
    assert "book_hotel returned: booked 2 nights in Lisbon" in browser.find_element(By.ID, "transcript").text
    browser.save_screenshot(str(tmp_path / "answer.png"))
    assert (tmp_path / "answer.png").stat().st_size > 0


def test_reloading_the_page_while_an_approval_is_pending_shows_it_and_lets_the_user_decide(
    browser: Any, app_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, GUARD)
    browser.get(app_url + "/")
    box = browser.find_element(By.ID, "message")
    box.clear()
    box.send_keys("Plan a weekend in Lisbon")
    browser.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".approval button.approve"))
    run_id = browser.execute_script("return window.agentkit.runId")

    browser.refresh()  # the run waits for its approval meanwhile
    approve = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".approval button.approve"))
    wait.until(lambda d: d.find_element(By.ID, "status").text == "interrupted")
    transcript = browser.find_element(By.ID, "transcript").text
    browser.save_screenshot(str(tmp_path / "reloaded.png"))
    assert browser.execute_script("return window.agentkit.runId") == run_id
    assert "Plan a weekend in Lisbon" in transcript  # what the user asked
    assert transcript.count("Book a hotel in Lisbon for 2 nights (120 EUR a night)?") == 1
    assert transcript.count("travel calls get_weather") == 1
    assert len(approve) == 1 and approve[0].is_enabled()

    approve[0].click()
    wait.until(lambda d: d.find_element(By.ID, "answer").text == ANSWER)
    assert browser.find_element(By.ID, "status").text == "completed"

    browser.refresh()  # a finished run reloads as it ended: its answer, nothing to decide
    wait.until(lambda d: d.find_element(By.ID, "answer").text == ANSWER)
    assert browser.find_element(By.ID, "status").text == "completed"
    assert [b for b in browser.find_elements(By.CSS_SELECTOR, ".approval button") if b.is_enabled()] == []
    assert browser.find_element(By.ID, "transcript").text.count("book_hotel returned") == 1


def test_page_reconnects_with_last_event_id_and_loses_and_repeats_nothing(
    browser: Any, tmp_path: Path
) -> None:
    from flask import request
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    release = threading.Event()
    resumed_from: list[str] = []
    reconnected = threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        release.wait(100)  # longer than the test's guards: a guard fails first
        return "released"

    model = ScriptedChatModel(
        [calls_message(call("wait_here"), content="Working on it."), "All done after the wait."]
    )
    agent = ChatModelAgent(AGENT_NAME, "d", model, tools=[wait_here])
    runner = Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    with LocalRuns({AGENT_NAME: runner}) as runs:
        # Streams end after 0.3 s without an event, so the page has to reconnect while the
        # tool waits.
        app = create_app(runs, idle_timeout=0.3)

        @app.before_request
        def note_reconnects() -> None:
            if request.headers.get("Last-Event-ID"):
                resumed_from.append(request.headers["Last-Event-ID"])
                reconnected.set()

        with serving(app) as url:
            wait = WebDriverWait(browser, GUARD)
            browser.get(url + "/")
            browser.find_element(By.ID, "send").click()
            assert reconnected.wait(GUARD)
            release.set()
            wait.until(lambda d: d.find_element(By.ID, "answer").text == "All done after the wait.")
            transcript = browser.find_element(By.ID, "transcript").text
            browser.save_screenshot(str(tmp_path / "reconnected.png"))
    assert transcript.count("Working on it.") == 1
    assert transcript.count("All done after the wait.") == 1
    assert transcript.count("wait_here returned: released") == 1
    assert transcript.count("calls wait_here()") == 1
    assert resumed_from and all(int(i) >= int(resumed_from[0]) for i in resumed_from)


def gated_runs(entered: threading.Event, release: threading.Event) -> LocalRuns:
    """The app's runs over an agent that waits in a tool until the test releases it."""

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        entered.set()
        release.wait(100)  # longer than the test's guards: a guard fails first
        return "released"

    model = ScriptedChatModel(
        lambda m: calls_message(call("wait_here"), content="Working on it.") if len(m) == 1 else "Finished."
    )
    agent = ChatModelAgent(AGENT_NAME, "d", model, tools=[wait_here])
    return LocalRuns({AGENT_NAME: Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())})


ATTACK = """<!doctype html><html><body>
<form id="attack" method="POST" action="{target}" enctype="{enctype}">
<input name='{{"approve": true, "x": "' value='"}}'>
</form>
<script>document.getElementById("attack").submit();</script>
</body></html>"""


@pytest.mark.parametrize("enctype", ["application/x-www-form-urlencoded", "text/plain"])
def test_a_page_of_another_origin_cannot_cancel_a_run_with_a_form_post(
    browser: Any, tmp_path: Path, enctype: str
) -> None:
    from flask import Flask
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    entered, release = threading.Event(), threading.Event()
    wait = WebDriverWait(browser, GUARD)
    with gated_runs(entered, release) as runs, serving(create_app(runs)) as app_url:
        browser.get(app_url + "/")
        browser.find_element(By.ID, "send").click()
        assert entered.wait(GUARD)
        run_id = wait.until(lambda d: d.execute_script("return window.agentkit.runId"))
        page = browser.current_window_handle
        # The user, still logged in to the app (its session cookie), opens another site: a
        # page on another port of the same host (same site, so the cookie goes along).
        evil = Flask("evil")
        target = f"{app_url}/api/runs/{run_id}/cancel"

        @evil.get("/")
        def attack_page() -> str:
            return ATTACK.format(target=target, enctype=enctype)

        with serving(evil) as evil_url:
            assert evil_url.rsplit(":", 1)[1] != app_url.rsplit(":", 1)[1]
            browser.switch_to.new_window("tab")
            browser.get(evil_url + "/")
            wait.until(lambda d: "cross-origin request refused" in d.find_element(By.TAG_NAME, "body").text)
            browser.save_screenshot(str(tmp_path / "refused.png"))
        browser.switch_to.window(page)
        release.set()
        wait.until(lambda d: d.find_element(By.ID, "answer").text == "Finished.")
        assert browser.find_element(By.ID, "status").text == "completed"


def test_the_pages_stop_button_cancels_its_run(browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    entered, release = threading.Event(), threading.Event()
    wait = WebDriverWait(browser, GUARD)
    with gated_runs(entered, release) as runs, serving(create_app(runs)) as url:
        browser.get(url + "/")
        browser.find_element(By.ID, "send").click()
        assert entered.wait(GUARD)
        stop = wait.until(lambda d: d.find_element(By.ID, "stop") if d.find_element(By.ID, "stop").is_enabled() else None)
        stop.click()
        wait.until(lambda d: d.find_element(By.ID, "status").text in ("stopping\u2026", "cancelled"))
        release.set()
        wait.until(lambda d: d.find_element(By.ID, "status").text == "cancelled")


def test_agui_page_runs_the_agent_over_ag_ui_and_approves_the_booking(
    browser: Any, app_url: str
) -> None:
    pytest.importorskip("ag_ui")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, GUARD)
    browser.get(app_url + "/agui")
    browser.find_element(By.ID, "send").click()
    approve = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".interrupt button.approve"))[0]
    assert browser.find_element(By.ID, "status").text == "waiting"
    assert "Book a hotel in Lisbon for 2 nights" in browser.find_element(By.ID, "interrupts").text
    approve.click()
    wait.until(lambda d: d.find_element(By.ID, "status").text == "completed")
    assert browser.find_element(By.ID, "answer").text == ANSWER
    events = browser.find_element(By.TAG_NAME, "body").get_attribute("data-events").split(",")
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
    assert {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_RESULT"} <= set(events)
