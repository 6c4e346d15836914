"""Headless Chromium for the browser tests: Debian's `chromium` driven through its `chromium-driver`
by Selenium (`scripts/ensure-chromium`, run by `make test`, installs both when missing).

The fixtures (tests/conftest.py) serve the app with pytest-django's `live_server` (a thread of the
test process, on the test database; static files served as `runserver` does):

    def test_landing_page(browser):                  # anonymous
        browser.open("/")
        assert browser.text("h1") == "..."
        browser.screenshot("landing")                # var/screenshots/landing.png

    def test_agent_page(staff_browser):              # signed in to the admin as a superuser
        staff_browser.open(reverse("admin:agents_agent_changelist"))

One Chromium serves the whole session; each test starts without cookies. The window is 1400x900
CSS pixels of page (the viewport) at scale 1, so a screenshot is what a person sees on a common laptop screen.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW_WIDTH, WINDOW_HEIGHT = 1400, 900
# Test artifacts, kept after the run for a person to look at (VAR_DIR is git-ignored).
SCREENSHOT_DIR = Path(settings.VAR_DIR) / "screenshots"
STAFF_USERNAME = "staff"
STAFF_PASSWORD = "browser-test-password"  # a throwaway account in the test database only


def chromium_start() -> WebDriver:
    """A headless Chromium at 1400x900. Fails the test with the fix when Chromium is not installed."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing: run scripts/ensure-chromium (apt-get install chromium chromium-driver)"
        )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        f"--window-size={WINDOW_WIDTH},{WINDOW_HEIGHT}",
        "--force-device-scale-factor=1",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",  # containers often have a 64 MB /dev/shm
        "--disable-gpu",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages, for console_errors()
    # An explicit driver path: Selenium Manager would otherwise try to download a browser.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    # --window-size counts the window's frame too: grow the window until the page gets 1400x900.
    inner_width, inner_height = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * WINDOW_WIDTH - inner_width, 2 * WINDOW_HEIGHT - inner_height)
    return driver


@dataclass
class Browser:
    """A Chromium pointed at one live server; paths are relative to it."""

    driver: WebDriver
    base_url: str

    def open(self, path: str) -> None:
        self.driver.get(f"{self.base_url}{path}")

    @property
    def path(self) -> str:
        """The current URL without the server: `/admin/agents/agent/?status__exact=running`."""
        return self.driver.current_url.removeprefix(self.base_url)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        """The visible text of the first element matching `css` (as rendered: hidden parts left out)."""
        return self.find(css).text

    def texts(self, css: str) -> list[str]:
        return [element.text for element in self.find_all(css)]

    def wait_for(self, css: str, timeout: float = 10) -> WebElement:
        """The first element matching `css` once it is visible (for pages that change after loading)."""
        return WebDriverWait(self.driver, timeout).until(
            expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, css))
        )

    def wait_for_text(self, css: str, text: str, timeout: float = 10) -> None:
        """Until the first element matching `css` contains `text`."""
        WebDriverWait(self.driver, timeout).until(
            expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
        )

    def fill(self, css: str, value: str) -> None:
        field = self.find(css)
        field.clear()
        field.send_keys(value)

    def submit(self, css: str = "[type=submit]") -> None:
        """Clicks the button and waits for the next page to load."""
        old_page = self.find("html")
        self.find(css).click()
        WebDriverWait(self.driver, 10).until(_left_the_document(old_page))

    def login(self, username: str = STAFF_USERNAME, password: str = STAFF_PASSWORD) -> None:
        """Signs in through the admin's login form, as a person does."""
        self.open("/admin/login/?next=/admin/")
        self.fill("#id_username", username)
        self.fill("#id_password", password)
        self.submit("#login-form [type=submit]")
        if not self.find_all("#user-tools"):
            raise AssertionError(f"not signed in as {username}: {self.text('body')[:500]}")

    def horizontal_overflow(self, css: str) -> int:
        """CSS pixels by which the element matching `css` is wider than its box (0: nothing to scroll
        sideways). The admin's change lists scroll inside `#changelist .results`."""
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e.scrollWidth - e.clientWidth;", css
        )

    def console_errors(self) -> list[str]:
        """Console messages of level SEVERE since the last call (JavaScript errors, failed loads)."""
        return [entry["message"] for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]

    def screenshot(self, name: str, *, full_page: bool = False) -> Path:
        """Saves the window (or the whole page, `full_page`) as var/screenshots/<name>.png."""
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        target = SCREENSHOT_DIR / f"{name}.png"
        if not full_page:
            self.driver.save_screenshot(str(target))
            return target
        content = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": content["width"], "height": content["height"], "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        target.write_bytes(base64.b64decode(shot["data"]))
        return target

    def reset(self) -> None:
        """Forgets the test's session and console, so the next test starts signed out."""
        self.driver.delete_all_cookies()
        self.driver.get("about:blank")
        self.driver.get_log("browser")


def _left_the_document(element: WebElement):
    """Like selenium's `staleness_of`, but Chromium may also answer a node that left the document
    during the navigation with "Node with given id does not belong to the document" (an unknown
    error, not a stale reference): that is the same outcome."""

    def gone(_driver: WebDriver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
        return False

    return gone
