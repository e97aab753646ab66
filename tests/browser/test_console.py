"""The web console in a real browser (Debian's chromium, driven by Selenium through
chromium-driver) against real `nexus api` and `nexus worker` processes on Postgres and
Redis, the model a local fake: a message sent from the console streams its answer live,
a turn forks from the tree, a bad setting is refused with the API's message and changes
nothing, a good one is saved, a dead letter is replayed; each page is photographed.

Screenshots go to the test's tmp directory, and also to $NEXUS_CONSOLE_SCREENSHOTS when
set (how docs/console/ is refreshed)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import NewQueueItem
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.processes import nexus_process
from tests.integration.worker_process import wait_for, worker_environment
from tests.support import free_port, new_session, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
TOKEN = "console-browser-token"
ANSWER = "Hello from the console, streamed in pieces."
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
WAIT_S = 45


def _dead_letter(database: Database) -> str:
    """A queue item that died, in its own session: what the console replays."""
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger, "console-dead")
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "again?"})
        )
        uow.ledger.queue.dispose(
            [item_id],
            status=QueueStatus.DEAD,
            disposition=Disposition.DEAD_LETTERED,
            detail="after 3 attempts: boom",
        )
        uow.commit()
    return item_id


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.fail("chromium and chromium-driver are needed (scripts/test installs them)")
    options = Options()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for chromium's own
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _until(driver: WebDriver, what: str, check: Callable[[WebDriver], Any]) -> Any:
    try:
        return WebDriverWait(
            driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
        ).until(check)
    except Exception as error:
        notice = driver.find_element(By.ID, "notice").text
        view = driver.find_element(By.ID, "view").text[:2000]
        raise AssertionError(f"{what}: notice={notice!r}\n{view}") from error


def _on_page(driver: WebDriver, hash_: str) -> None:
    driver.get(driver.current_url.split("#")[0] + hash_)
    _until(
        driver,
        f"page {hash_}",
        lambda d: d.find_element(By.ID, "view").get_attribute("data-page") == hash_,
    )


def _text(driver: WebDriver, element_id: str) -> str:
    found = driver.find_elements(By.ID, element_id)
    return found[0].text if found else ""


def _click(driver: WebDriver, css: str, keys: str | None = None) -> None:
    """Click what `css` finds (or type `keys` into it), found again if the page redrew it
    meanwhile (a stream event reloads the session's parts)."""

    def clicked(d: WebDriver) -> bool:
        found = d.find_element(By.CSS_SELECTOR, css)
        if keys is None:
            found.click()
        else:
            found.clear()
            found.send_keys(keys)
        return True

    try:
        WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(
            clicked
        )
    except TimeoutException as error:
        raise AssertionError(f"could not click {css}") from error


def test_the_console_drives_a_deployment(
    pg_database: Database, tmp_path: Path, browser: WebDriver
) -> None:
    dead = _dead_letter(pg_database)
    shots = [tmp_path]
    if os.environ.get("NEXUS_CONSOLE_SCREENSHOTS"):
        shots.append(Path(os.environ["NEXUS_CONSOLE_SCREENSHOTS"]))

    def photograph(name: str) -> None:
        for folder in shots:
            folder.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(folder / f"{name}.png"))

    api_port = free_port()
    with FakeAnthropicServer() as anthropic, ExitStack() as stack:
        anthropic.reply_text(ANSWER, chunks=6, delay_s=0.2)  # the message sent from the page
        anthropic.reply_text("Replayed, and answered.")  # the dead letter, once replayed
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_environment(pg_database.url),
            "NEXUS_API_TOKENS": TOKEN,
            "ANTHROPIC_API_KEY": "sk-ant-test-console",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "NEXUS_MODEL": "claude-sonnet-4-5",
        }
        worker_log = tmp_path / "worker.log"
        stack.enter_context(
            nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", environment)
        )
        stack.enter_context(
            nexus_process(
                ["worker", "-n", "console@%h", "--concurrency", "1"], worker_log, environment
            )
        )
        base = f"http://127.0.0.1:{api_port}"
        api = stack.enter_context(
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        )
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")

        # Without a token the page loads and says what /v1 answered.
        browser.get(f"{base}/ui")
        _until(browser, "the refusal", lambda d: "401" in _text(d, "load-error"))
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        _until(browser, "the sessions", lambda d: "console-dead" in _text(d, "sessions"))
        assert browser.execute_script("return localStorage.getItem('nexus.token')") == TOKEN

        # A new session, started by a message; its answer streams into the page.
        browser.find_element(By.ID, "new-session").send_keys("console-demo")
        browser.find_element(By.ID, "open-session").click()
        _until(browser, "the session page", lambda d: "No session" in _text(d, "running"))
        wait_for(lambda: b"ready." in worker_log.read_bytes(), timeout=90, what="the worker")
        browser.find_element(By.ID, "message").send_keys("Say hello to the console")
        browser.find_element(By.ID, "send").click()
        _until(browser, "a streamed piece", lambda d: _text(d, "live").strip() != "")
        partial = _text(browser, "live")
        _until(browser, "the commit", lambda d: "committed" in _text(d, "live-status"))
        assert _text(browser, "live") == ANSWER
        assert partial and ANSWER.startswith(partial)
        _until(browser, "the tree", lambda d: ANSWER[:20] in _text(d, "tree"))
        photograph("session")

        # A bad setting is refused with the API's message and changes nothing; a good one is kept.
        _click(browser, "#settings input[name=cap]", keys="0")
        _click(browser, "#save-settings")
        _until(browser, "the refusal", lambda d: "422" in _text(d, "notice"))
        assert "cap: must be at least 1" in _text(browser, "notice")
        assert api.get("/v1/sessions/console-demo").json()["queue_cap"] is None
        _click(browser, "#settings input[name=cap]", keys="5")
        _click(browser, "#save-settings")
        _until(browser, "the save", lambda d: "Settings saved" in _text(d, "notice"))
        assert api.get("/v1/sessions/console-demo").json()["queue_cap"] == 5

        # The turn itself: messages, model, tokens, cost.
        turn_id: str = _until(
            browser,
            "a turn in the tree",
            lambda d: d.find_element(By.CSS_SELECTOR, "#tree .turn").get_attribute("data-turn"),
        )
        _click(browser, f'#tree .turn[data-turn="{turn_id}"] a[href^="#/turn/"]')
        _until(browser, "the turn", lambda d: ANSWER in _text(d, "messages"))
        facts = _text(browser, "turn-facts")
        assert "claude-sonnet-4-5" in facts and "total tokens" in facts and "cost" in facts
        assert "Say hello to the console" in _text(browser, "messages")
        photograph("turn")

        # Fork from the tree: a new session whose head is that turn.
        _on_page(browser, "#/session/console-demo")
        _click(browser, f'#tree .turn[data-turn="{turn_id}"] button.fork')
        _until(
            browser,
            "the fork",
            lambda d: "fork-" in d.current_url and turn_id in _text(d, "tree"),
        )
        forked = httpx.URL(browser.current_url).fragment.removeprefix("/session/")
        assert api.get(f"/v1/sessions/{forked}").json()["origin"] == "fork"

        # Replay a dead letter; its input is answered.
        _on_page(browser, "#/dead-letters")
        _click(browser, f'#dead-letters tr[data-dead="{dead}"] button')
        _until(browser, "the replay", lambda d: "Replayed as" in _text(d, "notice"))
        replayed = api.get(f"/v1/dead-letters/{dead}").json()["replayed_as"]
        assert replayed is not None
        photograph("dead-letters")

        for page, shown in (
            ("#/hooks", "hooks"),
            ("#/usage", "usage-totals"),
            ("#/people", "entities"),
            ("#/sessions", "sessions"),
        ):
            _on_page(browser, page)
            assert browser.find_elements(By.ID, shown), page
            if page == "#/usage":
                bars = browser.find_elements(By.CSS_SELECTOR, "#usage-chart rect")
                assert bars and all(float(b.get_attribute("height") or 0) > 0 for b in bars)
            photograph(page.removeprefix("#/"))
