"""The administrator's page as the tests read it: a signed-in HTTP client, a page's CSRF token,
its words as text, and the facts a story writes through the REST API."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Iterator
from typing import Any

import httpx

from korely_memory import MemoryEngine, Operation

from .servers import GIULIA, TOKENS, Server

ADMIN_TOKEN = TOKENS["admin"][0]
WIFI = {"key": "office-wifi", "content": "The office Wi-Fi is acme-guest", "scope": "account"}
HOURS = {"key": "office-hours", "content": "The office opens at 7 on Sundays", "scope": "account"}
HOME = {"key": "home-city", "content": "Giulia lives in Rome", "valid_from": "2024-03-01"}
MILAN = {"content": "Giulia lives in Milan", "valid_from": "2025-09-15"}
LANGUAGE = {"key": "language", "content": "Giulia prefers Italian", "valid_from": "2024-03-01"}


def ok(response: httpx.Response, status: int = 200) -> Any:
    """The JSON of an answer that must have ``status``."""
    assert response.status_code == status, response.text
    return response.json()


@contextlib.contextmanager
def signed_in(server: Server) -> Iterator[httpx.Client]:
    """A client of ``server`` signed in to the administrator's page (it keeps the cookie)."""
    with server.client(None, follow_redirects=False) as client:
        answer = client.post("/admin/sign-in", data={"token": ADMIN_TOKEN})
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/admin"
        yield client


def csrf_of(page: httpx.Response | str) -> str:
    """The CSRF token a page's forms carry."""
    text = page if isinstance(page, str) else page.text
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None, text
    return found.group(1)


def words(page: httpx.Response | str) -> str:
    """What a page says: its text without tags, entities read, white space folded."""
    text = page if isinstance(page, str) else page.text
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    text = re.sub(r"</?(a|code|em|span|strong|time)\b[^>]*>", "", text)  # inside a line
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def message(page: httpx.Response) -> str:
    """The page's error message, as text."""
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', page.text, flags=re.S)
    assert found is not None, page.text
    return html.unescape(found.group(1))


def version_ids(page: httpx.Response | str) -> list[int]:
    """The ids of the fact versions a person's page shows, in its order."""
    text = page if isinstance(page, str) else page.text
    return [int(i) for i in re.findall(r'<li class="version \w+" id="version-(\d+)">', text)]


def page_link(page: httpx.Response | str, rel: str, section: str = "facts") -> str | None:
    """The link to another page (``rel``: first, prev or next) of a list of a person's page (the
    list of the ``section``: facts, account-facts, memories, held), as the browser follows it."""
    text = page if isinstance(page, str) else page.text
    found = re.search(rf'<section id="{section}">.*?</section>', text, flags=re.S)
    assert found is not None, f"no section {section}"
    link = re.search(rf'<a href="([^"]+)" rel="{rel}">', found.group(0))
    return html.unescape(link.group(1)).split("#")[0] if link else None


def giulias_story(server: Server) -> dict[str, Any]:
    """Giulia's facts with some history: her home city (read by her laptop, corrected by the
    application's backend, and the laptop told), the language she prefers, a pet read from a
    conversation, a change held for her approval, and two proposals for the account: one
    confirmed, one rejected.

    Returns the versions written, by name.
    """
    written: dict[str, Any] = {}
    with (
        server.client("giulia") as giulia,
        server.client("backend") as backend,
        server.client("admin") as admin,
    ):
        written["rome"] = rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        written["language"] = ok(giulia.post("/v1/facts", json=LANGUAGE), 201)
        ok(giulia.get("/v1/context", params={"query": "Where does Giulia live?"}))
        written["milan"] = ok(
            backend.patch(f"/v1/facts/{rome['id']}", params={"user_id": "giulia"}, json=MILAN)
        )
        told = ok(giulia.get("/v1/context", params={"query": "Where does Giulia live?"}))
        assert [c["cause"] for c in told["changed"]] == ["corrected"]
        written["wifi"] = wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
        ok(admin.post(f"/v1/proposals/{wifi['id']}/confirm"))
        written["hours"] = hours = ok(giulia.post("/v1/facts", json=HOURS), 201)
        ok(admin.post(f"/v1/proposals/{hours['id']}/reject"))
    with contextlib.closing(MemoryEngine(server.database)) as engine:
        said = [("user", "My cat Miso sleeps all day."), ("assistant", "Noted.")]
        pet = Operation("record", "pet", "Giulia has a cat called Miso")
        report = engine.capture(GIULIA, said, extractor=lambda m, f: [pet], reader="backend")
        [step] = report.steps
        assert step.fact is not None
        written["pet"] = step.fact
        moved = [("user", "I am moving to Turin in June."), ("assistant", "Noted.")]
        turin = Operation("replace", "home-city", "Giulia lives in Turin")
        held = engine.capture(
            GIULIA, moved, extractor=lambda m, f: [turin], hold_for_owner=True, reader="backend"
        )
        written["held"] = held.steps[0].pending
    return written
