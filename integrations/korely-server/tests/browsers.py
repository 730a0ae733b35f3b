"""A headless Chromium for the administrator's page: Debian's ``chromium`` and
``chromium-driver`` (``apt-get install chromium chromium-driver``), by their paths, so that
Selenium never looks for, or downloads, a browser of its own.

Without the driver the browser's tests skip, unless ``KORELY_REQUIRE_BROWSER=1`` (CI), where
they fail.
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

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH = 1200


def require_browser() -> None:
    """Skip the test (fail it under ``KORELY_REQUIRE_BROWSER=1``) where there is no browser."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if not missing:
        return
    reason = (
        f"no {' or '.join(missing)}: the administrator's page is tested in Debian's Chromium "
        "(apt-get install chromium chromium-driver)"
    )
    if os.environ.get("KORELY_REQUIRE_BROWSER") == "1":
        pytest.fail(f"KORELY_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def chromium(folder: Path) -> Iterator[WebDriver]:
    """A headless Chromium with its profile in ``folder`` and its downloads in
    ``folder / "downloads"``; it asks nothing of the network."""
    require_browser()
    options = Options()
    options.binary_location = str(CHROMIUM)
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
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
