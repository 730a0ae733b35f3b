"""Draw docs/images/admin-page.png again: the administrator's page of a person with some history.

    .venv/bin/python -m pytest -n0 integrations/korely-server/tests/screenshot.py

Not one of the tests (its name does not start with ``test_``): it runs when named. It starts a
server on a new SQLite file, writes Giulia's story through the REST API, signs in in headless
Chromium and saves her page.
"""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.common.by import By

from .browsers import WIDTH, chromium
from .pages import ADMIN_TOKEN, giulias_story
from .servers import running

IMAGE = Path(__file__).resolve().parents[3] / "docs" / "images" / "admin-page.png"
MOST_BYTES = 200_000
HEIGHT = 1300


def test_draw_the_persons_page(sqlite_url: str, tmp_path: Path) -> None:
    with running(sqlite_url, tmp_path) as server, chromium(tmp_path) as browser:
        giulias_story(server)
        browser.get(server.url + "/admin/sign-in")
        browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
        browser.find_element(By.CSS_SELECTOR, "form[action='/admin/sign-in'] button").click()
        browser.find_element(By.CSS_SELECTOR, ".top .who")
        browser.set_window_size(WIDTH, HEIGHT)
        browser.get(server.url + "/admin/people/giulia")
        png = browser.get_screenshot_as_png()  # the window: the page's head and first keys
    assert len(png) < MOST_BYTES, f"the screenshot is {len(png)} bytes"
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    IMAGE.write_bytes(png)
