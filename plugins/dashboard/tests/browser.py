"""A headless Chromium for the dashboard's browser tests, driven over WebDriver: Debian's
``chromium`` and ``chromedriver`` (one source package, so one version; .ci/run installs
them), never a browser or driver fetched at run time. Pages may load nothing from outside
127.0.0.1: every other host name fails to resolve, so a page that needs a CDN breaks here."""

from __future__ import annotations

import base64
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from tests.missing import missing

T = TypeVar("T")

WINDOW = (1280, 900)
# what Chromium needs to run headless as root in a container, and to stay off the network
CHROMIUM_ARGUMENTS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
    "--lang=en-US",
)


class Browser:
    """One browser window on one dashboard: open pages, wait for what they show, submit
    forms, save screenshots. Every wait is explicit and its failure names what the page
    showed instead."""

    def __init__(self, driver, base_url: str, screenshots: Path, timeout: float = 20.0) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/")
        self.screenshots = screenshots
        self.timeout = timeout

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def find(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def type_into(self, css: str, text: str) -> None:
        """Replace what the field holds with ``text``, typed."""
        element = self.find(css)
        element.clear()
        element.send_keys(text)

    def submit(self, css: str) -> None:
        """Click a GET form's button ``css`` and wait for the page it asks for: a reload
        before that page came would cancel the submission and load the old one again."""
        before = self.driver.current_url
        self.find(css).click()
        self.until(lambda: self.driver.current_url != before, f"the page {css} asks for")

    def text(self, css: str = "body") -> str:
        return str(self.find(css).text)

    def until(self, condition: Callable[[], T | bool | None], what: str) -> T:
        """Poll ``condition`` until it returns something true; fail naming ``what`` and the
        page's text otherwise."""
        from selenium.common.exceptions import TimeoutException, WebDriverException
        from selenium.webdriver.support.wait import WebDriverWait

        wait = WebDriverWait(
            self.driver, self.timeout, poll_frequency=0.2, ignored_exceptions=[WebDriverException]
        )
        try:
            return wait.until(lambda _driver: condition())
        except TimeoutException:
            raise AssertionError(
                f"{what}: not within {self.timeout} s on {self.driver.current_url} (see"
                f" {self._failure_screenshot(what)}); the page shows:\n{self._visible_text()}"
            ) from None

    def wait_for_text(self, text: str, css: str = "body") -> None:
        self.until(lambda: text in self.text(css), f"{text!r} in {css}")

    def reload_until(self, condition: Callable[[], T | bool | None], what: str) -> T:
        """For pages that show a snapshot: reload until ``condition`` holds."""

        def reloaded() -> T | bool | None:
            self.driver.refresh()
            return condition()

        return self.until(reloaded, what)

    def javascript_errors(self) -> list[str]:
        """Console errors since the last call (scripts that failed to load or threw)."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and "favicon.ico" not in entry["message"]
        ]

    def screenshot(self, name: str) -> Path:
        """The whole page (not only the window) as ``<name>.png`` in the screenshots folder."""
        path = self.screenshots / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
        # Chromium's DevTools capture past the viewport, at the page's laid-out size
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "scale": 1}
        clip |= {"width": max(size["width"], WINDOW[0]), "height": min(size["height"], 8000)}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def _failure_screenshot(self, what: str) -> str:
        try:
            return str(self.screenshot(f"failed-{what[:60]}"))
        except Exception as exc:  # the browser may be gone; the failure is reported anyway
            return f"no screenshot: {exc}"

    def _visible_text(self) -> str:
        try:
            return self.text()[:3000]
        except Exception as exc:  # the page may be gone; say so rather than hide the failure
            return f"(no page text: {exc})"


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium and its WebDriver; skips locally (fails under CI) if either is
    not installed."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed: pip install -e .[test]")
    binary, driver_binary = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver_binary is None:
        missing("Chromium is not installed: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in CHROMIUM_ARGUMENTS:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the given chromedriver: Selenium looks for (and would download) nothing
    driver = webdriver.Chrome(options=options, service=Service(driver_binary))
    driver.set_page_load_timeout(60)  # a page that hangs fails its test, not the run
    try:
        yield driver
    finally:
        driver.quit()
