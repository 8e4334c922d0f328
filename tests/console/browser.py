"""Debian's Chromium driven by Selenium through Debian's chromedriver: no browser download.

with chromium(tmp_path) as driver:      # headless, 1280 x 800, a fresh profile
    driver.get(url)
with chromium(tmp_path, width=390) as driver:   # a phone's width
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
)


def require_browser() -> None:
    """Skip (with the install line) where the Debian packages are missing."""
    pytest.importorskip("selenium")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install -y chromium "
                    "chromium-driver; .ci/run installs them)")  # fmt: skip


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 800) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(60)
        # The viewport itself at width x height (a window of that size leaves less for the
        # page). `mobile` stays off: a narrow desktop window, the layout a phone's browser
        # gives a page with `width=device-width`, without touch emulation.
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def wait_for(driver, element_id: str, timeout: float = 30.0):
    """The element with this id once the page that holds it has loaded."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        expected_conditions.presence_of_element_located((By.ID, element_id))
    )
