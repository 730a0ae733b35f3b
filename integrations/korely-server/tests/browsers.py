"""A headless Chromium for the administrator's page: Debian's ``chromium`` and
``chromium-driver`` (``apt-get install chromium chromium-driver``), by their paths, so that
Selenium never looks for, or downloads, a browser of its own.

``KORELY_CHROMIUM`` and ``KORELY_CHROMEDRIVER`` name another browser and its driver, of one
version: on GitHub's Ubuntu runners, which have no Debian package, `.ci/run` sets them to the
image's Google Chrome and the driver in ``$CHROMEWEBDRIVER``. Without the browser or the driver
the browser's tests skip, unless ``KORELY_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

WIDTH = 1200


def browser_paths() -> tuple[Path, Path]:
    """The browser and its driver: ``$KORELY_CHROMIUM`` and ``$KORELY_CHROMEDRIVER``, where set,
    else Debian's ``/usr/bin/chromium`` and ``/usr/bin/chromedriver``."""
    return (
        Path(os.environ.get("KORELY_CHROMIUM") or "/usr/bin/chromium"),
        Path(os.environ.get("KORELY_CHROMEDRIVER") or "/usr/bin/chromedriver"),
    )


def require_browser() -> None:
    """Skip the test (fail it under ``KORELY_REQUIRE_BROWSER=1``) where there is no browser."""
    missing = [str(path) for path in browser_paths() if not path.exists()]
    if not missing:
        return
    reason = (
        f"no {' or '.join(missing)}: the administrator's page is tested in Debian's Chromium "
        "(apt-get install chromium chromium-driver), or the browser and driver that "
        "$KORELY_CHROMIUM and $KORELY_CHROMEDRIVER name"
    )
    if os.environ.get("KORELY_REQUIRE_BROWSER") == "1":
        pytest.fail(f"KORELY_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def chromium(folder: Path) -> Iterator[WebDriver]:
    """A headless Chromium with its profile in ``folder`` and its downloads in
    ``folder / "downloads"``; it asks nothing of the network."""
    require_browser()
    browser, driver_path = browser_paths()
    options = Options()
    options.binary_location = str(browser)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        f"--window-size={WIDTH},900",
        f"--user-data-dir={folder / 'profile'}",
    ):
        options.add_argument(argument)
    downloads = folder / "downloads"
    downloads.mkdir(exist_ok=True)
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(downloads),
            "download.prompt_for_download": False,
            "safebrowsing.enabled": False,
        },
    )
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path)), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
