"""The administrator's page in a real browser (headless Chromium), against a running
`korely-server` on SQLite and PostgreSQL: sign in, confirm and reject proposals, open a person,
export and erase them; what each step did is checked through the REST API."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import (
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from korely_memory import MemoryEngine

from .browsers import browser_paths, chromium, require_browser
from .pages import ADMIN_TOKEN, HOME, HOURS, LANGUAGE, WIFI, ok
from .servers import GIULIA, Server, running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """One browser for the module's tests (each starts with no cookie)."""
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def replaced(error: WebDriverException) -> bool:
    """Whether ``error`` says the element's page was replaced under it (Chromium reports a
    node of the old document either as stale or as "does not belong to the document")."""
    return isinstance(error, StaleElementReferenceException) or (
        "does not belong to the document" in (error.msg or "")
    )


def shown(browser: WebDriver, css: str, text: str = "") -> WebElement:
    """The element ``css`` names once the page shows it (holding ``text``)."""

    def found(driver: WebDriver) -> WebElement | None:
        try:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if text in element.text:
                    return element
        except WebDriverException as error:
            if not replaced(error):
                raise
        return None

    # A page being replaced leaves elements of the old one: look again. Long enough for a
    # machine whose two cores run the rest of the suite too; a page that never shows it says
    # what it shows.
    try:
        element: WebElement = WebDriverWait(browser, 40).until(found)
    except TimeoutException:
        page = browser.find_element(By.TAG_NAME, "body").text[:1500]
        raise AssertionError(
            f"no {css} with {text!r} at {browser.current_url} ({browser.title!r}):\n{page}"
        ) from None
    return element


def act(browser: WebDriver, css: str, text: str, action: Callable[[WebElement], None]) -> None:
    """Do ``action`` on the element ``css`` names once shown, found again if its page was
    replaced between finding and acting (an action that raised did not happen)."""
    for _ in range(5):
        try:
            action(shown(browser, css, text))
            return
        except WebDriverException as error:
            if not replaced(error):
                raise
    raise AssertionError(f"{css} with {text!r} was replaced on every try")


def press(browser: WebDriver, css: str, text: str = "") -> None:
    act(browser, css, text, lambda element: element.click())


def type_into(browser: WebDriver, css: str, keys: str) -> None:
    act(browser, css, "", lambda element: element.send_keys(keys))


def downloaded(folder: Path, name: str) -> Path:
    """The file ``name`` once the browser has finished downloading it into ``folder``."""
    path = folder / name
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if path.exists() and not list(folder.glob("*.crdownload")):
            return path
        time.sleep(0.05)
    raise AssertionError(f"no {name} in {folder}: {sorted(p.name for p in folder.iterdir())}")


def sign_in(browser: WebDriver, server: Server) -> None:
    browser.delete_all_cookies()  # the module's browser: another test's server shared the host
    browser.get(server.url + "/admin/sign-in")
    type_into(browser, "#token", ADMIN_TOKEN)
    press(browser, "form[action='/admin/sign-in'] button")
    shown(browser, "h1", "Review queue")


def one_key_replaced(versions: int) -> dict[str, Any]:
    """An export of Giulia holding ``versions`` versions of her key ``city``, each replacing the
    one before a millisecond later, as ``remember`` writes them: imported, all of them are
    written in one transaction (``remember`` one at a time cost most of the test, which is
    about the pages, not the writes). Made from the export of one version, so that every field
    but the chain's is the engine's own."""
    with contextlib.closing(MemoryEngine("sqlite://")) as scratch:
        scratch.remember(GIULIA, "city", "Giulia moved to town 0")
        export = scratch.export_user(GIULIA.account, GIULIA.user).to_dict()
    first = export["facts"][0]
    start = dt.datetime.fromisoformat(first["recorded_at"])

    def at(n: int) -> str | None:
        return (start + dt.timedelta(milliseconds=n)).isoformat() if n < versions else None

    last = versions - 1
    export["facts"] = [
        first
        | {
            "id": n + 1,
            "content": f"Giulia moved to town {n}",
            "valid_from": at(n),
            "recorded_at": at(n),
            "modified_at": at(n),
            "invalid_at": at(n + 1),
            "ended_recorded_at": at(n + 1),
            "end_cause": "stated" if n < last else None,
            "replaced_by_id": n + 2 if n < last else None,
        }
        for n in range(versions)
    ]
    return export


def test_a_person_with_thousands_of_versions_is_shown_a_page_at_a_time(
    browser: WebDriver, sqlite_url: str, tmp_path: Path
) -> None:
    """2,000 versions of one key made a page of megabytes, hundreds of thousands of pixels
    tall: each page holds 100, and the page links lead to the last, the oldest version."""
    versions = 2000
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        ids = sorted(fact.id for fact in engine.import_user(one_key_replaced(versions)).facts)
    with running(sqlite_url, tmp_path) as server:
        sign_in(browser, server)
        browser.get(server.url + "/admin/people/giulia")
        shown(browser, "h1", "giulia")
        assert shown(browser, "#key-city .now").text == f"Giulia moved to town {versions - 1}"
        tall = browser.execute_script("return document.documentElement.scrollHeight")
        assert tall < 30_000, f"the page is {tall} px tall"
        assert len(browser.page_source) < 300_000

        seen: list[int] = []
        for start in range(1, versions, 100):
            place = shown(browser, "#facts .pages .place", f"Versions {start} to ")
            assert place.text == f"Versions {start} to {start + 99} of {versions}"
            # The ids in one call: one call an item cost most of the test.
            items = browser.execute_script(
                "return Array.from(document.querySelectorAll('#facts li.version'), e => e.id)"
            )
            seen += [int(item.removeprefix("version-")) for item in items]
            assert len(items) == 100
            if start + 100 < versions:
                press(browser, "#facts .pages a[rel=next]")
        # The last page: the oldest version, ended, and no link further.
        assert sorted(seen) == ids
        oldest = shown(browser, f"#version-{ids[0]}")
        assert "Giulia moved to town 0" in oldest.text and "Ended" in oldest.text
        assert "Versions 1 to 100 of its 2000" in shown(browser, "#key-city .part").text
        assert not browser.find_elements(By.CSS_SELECTOR, "#facts .pages a[rel=next]")
        # Back one page, then to the first.
        press(browser, "#facts .pages a[rel=prev]")
        shown(browser, "#facts .pages .place", f"Versions 1801 to 1900 of {versions}")
        press(browser, "#facts .pages a[rel=first]")
        shown(browser, "#facts .pages .place", f"Versions 1 to 100 of {versions}")
        assert shown(browser, f"#version-{ids[-1]}").is_displayed()


def test_an_export_of_a_non_ascii_name_downloads_under_that_name(
    browser: WebDriver, db_url: str, tmp_path: Path
) -> None:
    downloads = Path(browser.capabilities["chrome"]["userDataDir"]).parent / "downloads"
    with running(db_url, tmp_path) as server, server.client("backend") as backend:
        fact = {"key": "city", "content": "Zoë lives in Tromsø"}
        ok(backend.post("/v1/facts", params={"user_id": "zoë"}, json=fact), 201)
        sign_in(browser, server)
        browser.get(server.url + "/admin/people/zo%C3%AB/export")
        press(browser, "button", "Download the export")
        export = json.loads(downloaded(downloads, "korely-export-acme-zoë.json").read_text())
        assert export["user"] == "zoë" and export["facts"][0]["content"] == fact["content"]


def test_an_administrator_reviews_exports_and_erases_in_the_browser(
    browser: WebDriver, db_url: str, tmp_path: Path
) -> None:
    browser.delete_all_cookies()  # the module's browser: another test's server shared the host
    downloads = Path(browser.capabilities["chrome"]["userDataDir"]).parent / "downloads"
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("marco") as marco,
    ):
        ok(giulia.post("/v1/facts", json=HOME), 201)
        ok(giulia.post("/v1/facts", json=LANGUAGE), 201)
        wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
        hours = ok(giulia.post("/v1/facts", json=HOURS), 201)

        # Sign in: the page sends the browser to the form, then back to the queue.
        browser.get(server.url + "/admin")
        shown(browser, "h1", "Sign in").is_displayed()
        type_into(browser, "#token", ADMIN_TOKEN)
        press(browser, "form[action='/admin/sign-in'] button")
        shown(browser, "h1", "Review queue")
        assert browser.current_url == server.url + "/admin"

        # Confirm one proposal: Marco's block shows it. Reject the other: it shows nowhere.
        press(browser, f"#proposal-{wifi['id']} button[value=confirm]")
        shown(browser, ".notice", "Confirmed 'office-wifi'")
        assert WIFI["content"] in ok(marco.get("/v1/context"))["text"]
        press(browser, f"#proposal-{hours['id']} button[value=reject]")
        shown(browser, ".notice", "Rejected 'office-hours'")
        shown(browser, ".empty", "No proposal is waiting.")
        assert HOURS["content"] not in ok(marco.get("/v1/context"))["text"]

        # Giulia's page, looked up by name.
        type_into(browser, "#lookup-user", "giulia")
        press(browser, "form.lookup button")
        shown(browser, "h1", "giulia")
        assert shown(browser, "#key-home-city .now").text == HOME["content"]
        assert "Giulia prefers Italian" in shown(browser, "#key-language").text

        # Export: a confirmation, then the file.
        press(browser, "a.button", "Export")
        press(browser, "button", "Download the export")
        export = json.loads(downloaded(downloads, "korely-export-acme-giulia.json").read_text())
        assert export["user"] == "giulia"
        assert {f["content"] for f in export["facts"]} >= {HOME["content"], LANGUAGE["content"]}

        # Erase: the name typed first; the report after.
        # Back to her page, as the export page's own link goes (browser.get() right after a
        # download may be swallowed by the download's navigation: it once left the page as it was).
        press(browser, "a", "Back")
        press(browser, "a.button.danger", "Erase")
        shown(browser, "h1", "Erase giulia")
        type_into(browser, "#confirm-user", "giulia")
        press(browser, "button.danger[type=submit]")
        report = shown(browser, "h1", "giulia was erased")
        kept = shown(browser, "table.report").text.replace("\n", " ")
        assert "Account facts kept, under the pseudonym 1" in kept
        assert report.is_displayed()

        # Through the API: nothing of Giulia's own is left; the account's fact she proposed stays
        # for everyone, and Marco's block shows none of her words but that.
        left = ok(giulia.get("/v1/facts", params={"include_invalidated": True}))["facts"]
        assert [(f["key"], f["scope"]) for f in left] == [("office-wifi", "account")]
        assert left[0]["user"] != "giulia"
        block = ok(marco.get("/v1/context", params={"query": "Giulia Rome Italian"}))["text"]
        assert WIFI["content"] in block
        assert "Rome" not in block and "Italian" not in block


def test_the_browser_and_its_driver_are_the_ones_the_variables_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """$KORELY_CHROMIUM and $KORELY_CHROMEDRIVER name the browser and its driver (CI sets them
    to the runner image's Chrome where there is no Debian package); unset, Debian's paths."""
    monkeypatch.setenv("KORELY_CHROMIUM", str(tmp_path / "chrome"))
    monkeypatch.setenv("KORELY_CHROMEDRIVER", str(tmp_path / "driver"))
    assert browser_paths() == (tmp_path / "chrome", tmp_path / "driver")
    monkeypatch.setenv("KORELY_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match=r"no \S+/chrome or \S+/driver"):
        require_browser()
    monkeypatch.delenv("KORELY_CHROMIUM")
    monkeypatch.setenv("KORELY_CHROMEDRIVER", "")
    assert browser_paths() == (Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver"))
