"""The administrator's page of a running `korely-server`, over HTTP, on SQLite and PostgreSQL:
who may sign in, the session's cookie and CSRF token, the review queue, a person's page, export
and erasure behind their confirmation, and fact text shown as text."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

from korely_memory import Identity, MemoryEngine, Scope

from .pages import (
    ADMIN_TOKEN,
    HOURS,
    WIFI,
    csrf_of,
    giulias_story,
    message,
    ok,
    page_link,
    signed_in,
    version_ids,
    words,
)
from .servers import (
    ADMIN,
    AGENT,
    GIULIA,
    MARCO,
    TOKENS,
    mcp_tls,
    running,
    token_entry,
    write_tokens,
)

HOSTILE = "<script>alert(1)</script>"


def test_only_an_administrators_token_signs_in(db_url: str, tmp_path: Path) -> None:
    with running(db_url, tmp_path) as server, server.client(None) as browser:
        away = browser.get("/admin", follow_redirects=False)
        assert (away.status_code, away.headers["location"]) == (303, "/admin/sign-in")

        bad = browser.post("/admin/sign-in", data={"token": "ksrv_nobody-" + "n" * 32})
        assert bad.status_code == 401 and "not a token the server knows" in message(bad)
        for name in ("giulia", "backend"):
            refused = browser.post("/admin/sign-in", data={"token": TOKENS[name][0]})
            assert refused.status_code == 403, name
            assert "not an administrator's" in message(refused)
        assert "set-cookie" not in refused.headers and not browser.cookies

        answer = browser.post("/admin/sign-in", data={"token": ADMIN_TOKEN})
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"]
        assert re.match(r"korely_admin=[\w-]{40,};", cookie)
        assert {"HttpOnly", "Path=/admin", "SameSite=strict"} <= set(cookie.split("; "))
        assert ADMIN_TOKEN not in cookie  # the cookie names a session, never the token

        queue = browser.get("/admin")
        assert queue.status_code == 200 and "Review queue" in words(queue)
        assert "ada of acme (admin)" in words(queue)
        assert queue.headers["cache-control"] == "no-store"
        assert "frame-ancestors 'none'" in queue.headers["content-security-policy"]
        assert "<script" not in queue.text  # the page runs no script
        assert browser.get("/admin/").text == queue.text
        style = browser.get("/admin/admin.css")
        assert style.headers["content-type"].startswith("text/css") and ".timeline" in style.text

        # Signing out needs the session's CSRF token, and ends the session on the server.
        assert browser.post("/admin/sign-out").status_code == 403
        session = browser.cookies["korely_admin"]
        out = browser.post("/admin/sign-out", data={"csrf": csrf_of(queue)}, follow_redirects=False)
        assert (out.status_code, out.headers["location"]) == (303, "/admin/sign-in?out=signed-out")
        assert not browser.cookies
        browser.cookies.set("korely_admin", session, path="/admin")
        again = browser.get("/admin", follow_redirects=False)
        assert again.headers["location"] == "/admin/sign-in?out=expired"


def test_the_queue_changes_only_with_the_sessions_csrf_token(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        signed_in(server) as browser,
        server.client("giulia") as giulia,
        server.client("backend") as backend,
        server.client("marco") as marco,
        server.client("admin") as admin,
    ):
        wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
        hours = ok(backend.post("/v1/facts", params={"user_id": "giulia"}, json=HOURS), 201)
        queue = browser.get("/admin")
        row = re.search(rf'<tr id="proposal-{wifi["id"]}">.*?</tr>', queue.text, flags=re.S)
        assert row is not None
        said = words(row.group(0))
        assert all(
            part in said for part in ("office-wifi", WIFI["content"], "giulia", GIULIA.agent)
        )
        assert wifi["recorded_at"][:10] in said
        assert f'id="proposal-{hours["id"]}"' in queue.text

        confirm = f"/admin/proposals/{wifi['id']}/confirm"
        for refused in (
            browser.post(confirm),
            browser.post(confirm, data={"csrf": "not-the-token"}),
            # A page of another origin (the server's Host and Origin checks stop any other site).
            browser.post(
                confirm,
                data={"csrf": csrf_of(queue)},
                headers={"Origin": server.url.replace("127.0.0.1", "localhost")},
            ),
        ):
            assert refused.status_code == 403 and "nothing was changed" in message(refused)
        evil = {"Origin": "http://evil.example"}
        assert browser.post(confirm, data={"csrf": csrf_of(queue)}, headers=evil).status_code == 403
        # A bearer token is no session: the page does not take it.
        bearer = admin.post(confirm, data={"csrf": csrf_of(queue)})
        assert (bearer.status_code, bearer.headers["location"]) == (303, "/admin/sign-in")
        assert len(ok(admin.get("/v1/proposals"))["facts"]) == 2
        assert WIFI["content"] not in ok(marco.get("/v1/context"))["text"]

        done = browser.post(confirm, data={"csrf": csrf_of(queue)})
        assert (done.status_code, done.headers["location"]) == (303, "/admin")
        shown = browser.get("/admin")
        assert "Confirmed 'office-wifi': every user of the account sees it now." in words(shown)
        assert f'id="proposal-{wifi["id"]}"' not in shown.text
        assert WIFI["content"] in ok(marco.get("/v1/context"))["text"]
        assert "Confirmed" not in words(browser.get("/admin"))  # a notice is shown once

        rejected = browser.post(
            f"/admin/proposals/{hours['id']}/reject", data={"csrf": csrf_of(queue)}
        )
        assert rejected.status_code == 303
        assert "No proposal is waiting." in words(browser.get("/admin"))
        assert HOURS["content"] not in ok(marco.get("/v1/context"))["text"]

        # What the engine refuses is a message on the queue, with its status, not a trace.
        again = browser.post(
            f"/admin/proposals/{hours['id']}/confirm", data={"csrf": csrf_of(queue)}
        )
        assert again.status_code == 409 and "was rejected by ada" in message(again)
        assert "Review queue" in words(again)
        # A form sent twice (a second click, a reload) decides nothing the second time.
        twice = browser.post(confirm, data={"csrf": csrf_of(queue)})
        assert twice.status_code == 409 and "was confirmed by ada" in message(twice)
        assert "every user of the account sees it now" not in words(twice)
        missing = browser.post("/admin/proposals/999999/confirm", data={"csrf": csrf_of(queue)})
        assert missing.status_code == 404 and "999999" in message(missing)
        bad = browser.post("/admin/proposals/first/confirm", data={"csrf": csrf_of(queue)})
        assert bad.status_code == 422 and "fact_id" in message(bad)
        # Digits of other scripts are not ids: '²' once made a 500, '١٠' confirmed fact 10.
        for digits in ("²", "١٠", str(2**63), "9" * 5000):  # 5,000 digits: int() refuses
            odd = browser.post(f"/admin/proposals/{digits}/confirm", data={"csrf": csrf_of(queue)})
            assert odd.status_code == 422 and "fact_id" in message(odd), digits
        assert "Traceback" not in again.text + missing.text + bad.text


def test_an_administrator_the_engine_does_not_list_is_told_why(
    sqlite_url: str, tmp_path: Path
) -> None:
    with (
        running(sqlite_url, tmp_path, admin=False) as server,
        signed_in(server) as browser,
        server.client("giulia") as giulia,
    ):
        wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
        queue = browser.get("/admin")
        refused = browser.post(
            f"/admin/proposals/{wifi['id']}/confirm", data={"csrf": csrf_of(queue)}
        )
        assert refused.status_code == 403
        assert message(refused) == "'ada' is not an administrator of account 'acme'"
        assert f'id="proposal-{wifi["id"]}"' in refused.text


def test_a_persons_page_shows_each_keys_history_and_who_was_handed_it(
    db_url: str, tmp_path: Path
) -> None:
    with running(db_url, tmp_path) as server, signed_in(server) as browser:
        story = giulias_story(server)
        page = browser.get("/admin/people/giulia")
        assert page.status_code == 200
        said = words(page)
        assert "giulia In acme, through the agent support-copilot" in said

        home = _version(page.text, story["rome"]["id"])
        assert "Giulia lives in Rome" in home and "the person's" in home
        assert "True from 2024-03-01 until 2025-09-15" in home
        assert "Written stated by giulia" in home
        assert f"Ended corrected, by #{story['milan']['id']}" in home
        assert re.search(r"giulia-laptop: first [\d-]+ [\d:]+ UTC; told of its end", home)
        milan = _version(page.text, story["milan"]["id"])
        assert "True from 2025-09-15 until now" in milan
        assert "giulia-laptop: first" in milan and "Ended" not in milan
        # The drawing: a bar per version, the ended one before the one that holds.
        drawing = re.search(r'<svg class="timeline".*?</svg>', page.text, flags=re.S)
        assert drawing is not None
        bars = re.findall(r'<rect class="bar (\w+)" x="([\d.]+)"', drawing.group(0))
        assert [state for state, _ in bars] == ["ended", "current"]
        assert float(bars[0][1]) < float(bars[1][1])

        pet = _version(page.text, story["pet"].id)
        assert f"read from memory #{story['pet'].source_memory_id}" in pet
        wifi = _version(page.text, story["wifi"]["id"])
        assert "the account's" in wifi and "proposed for the account by giulia" in wifi
        assert "proposed for the account by giulia; confirmed by ada" in wifi
        hours = _version(page.text, story["hours"]["id"])
        assert "rejected for the account" in hours and "Ended rejected by an administrator" in hours
        # Its reviewer rejected it: the page says so, never that she confirmed it.
        assert "proposed for the account by giulia; rejected by ada" in hours
        assert "confirmed" not in hours
        assert 'class="bar rejected"' in page.text

        held = re.search(r'<table class="pending">.*?</table>', page.text, flags=re.S)
        assert held is not None
        assert "correct home-city Giulia lives in Turin" in words(held.group(0))
        assert "approve" not in held.group(0).lower()  # the person's own act, not the page's
        assert "1 held for approval" in said
        assert f"#{story['milan']['id']}" in words(held.group(0))
        assert "written since" not in held.group(0)
        # Someone writes the key meanwhile: the held change would overwrite it, and says so.
        with server.client("backend") as backend:
            later = {"content": "Giulia lives in Genoa"}
            genoa = ok(
                backend.patch(
                    f"/v1/facts/{story['milan']['id']}", params={"user_id": "giulia"}, json=later
                )
            )
        again = browser.get("/admin/people/giulia")
        held = re.search(r'<table class="pending">.*?</table>', again.text, flags=re.S)
        assert held is not None
        assert f"written since (#{genoa['id']} holds now)" in words(held.group(0))

        # A person is looked up by name, and names follow the engine's rule.
        found = browser.get("/admin/people", params={"user": "giulia"})
        assert (found.status_code, found.headers["location"]) == (303, "/admin/people/giulia")
        for bad, field in (("a\nb", "user"), ("x" * 300, "user"), ("..", "user")):
            refused = browser.get("/admin/people", params={"user": bad})
            assert refused.status_code == 422 and message(refused).startswith(f"{field}: ")
        other_agent = browser.get("/admin/people/giulia", params={"agent": "a\tb"})
        assert other_agent.status_code == 422 and message(other_agent).startswith("agent: ")
        nobody = browser.get("/admin/people/nobody")
        assert (
            nobody.status_code == 200
            and "No fact of their own through support-copilot" in words(nobody)
        )


def test_a_persons_page_pages_their_versions_as_the_api_does(db_url: str, tmp_path: Path) -> None:
    """125 versions of Giulia's (120 of one key), and 3 account facts Marco stated: each page
    holds the versions /v1/facts gives for the same limit and cursor, and its links (plain
    links, the other lists' places kept) reach every version once, the last page too."""
    with contextlib.closing(MemoryEngine(db_url)) as engine:
        for n in range(120):
            engine.remember(GIULIA, "city", f"Giulia lives in town {n}")
        for n in range(5):
            engine.remember(GIULIA, f"k{n}", f"Giulia's fact {n}")
        assert ADMIN.user is not None
        engine.grant_admin(ADMIN.account, ADMIN.user)
        for n in range(3):
            proposed = engine.remember(MARCO, f"rule-{n}", f"Rule {n}", scope=Scope.ACCOUNT)
            engine.confirm(ADMIN, proposed.id)
        everything = {f.id for f in engine.get_facts(GIULIA, include_invalidated=True)}
        shared = {f.id for f in engine.get_facts(MARCO) if f.key.startswith("rule-")}
    with (
        running(db_url, tmp_path) as server,
        signed_in(server) as browser,
        server.client("backend") as backend,
    ):
        # The API's default page: 100 versions, and a link to the next.
        first = browser.get("/admin/people/giulia")
        assert first.status_code == 200 and len(version_ids(_section(first, "facts"))) == 100
        assert "Versions 1 to 100 of 125" in words(first)
        assert page_link(first, "next") is not None and page_link(first, "first") is None

        # Page by page, the API's pages: the same versions, and the same cursor. (The API lists
        # Marco's account facts too: their keys come after Giulia's.)
        link: str | None = f"/admin/people/giulia?agent={AGENT}&limit=50"
        api = {"user_id": "giulia", "include_invalidated": True, "limit": 50}
        seen: list[int] = []
        pages = []
        cursor: str | None = None
        while link is not None:
            page = browser.get(link)
            assert page.status_code == 200, page.text
            asked = {**api, "cursor": cursor} if cursor else api
            answer = ok(backend.get("/v1/facts", params=asked))
            theirs = [f["id"] for f in answer["facts"] if f["id"] not in shared]
            shows = version_ids(_section(page, "facts"))
            assert sorted(shows) == sorted(theirs)
            seen += shows
            pages.append(page)
            link = page_link(page, "next")
            cursor = answer["next_cursor"]
            if link is not None:
                query = parse_qs(urlsplit(link).query)
                assert query == {"agent": [AGENT], "limit": ["50"], "cursor": [cursor]}
        assert len(pages) == 3 and cursor is None
        assert sorted(seen) == sorted(everything - shared)  # each version once
        # A key cut by pages says which of its versions a page holds, and what holds now.
        middle = pages[1]
        assert "Versions 21 to 70 of its 120, oldest first" in words(middle)
        assert "city Giulia lives in town 119" in words(middle)
        assert f"version-{max(everything - shared)}" not in middle.text
        last = pages[2]
        assert "Versions 101 to 125 of 125" in words(last)
        assert "Versions 1 to 20 of its 120" in words(last)
        back = browser.get(page_link(last, "prev") or "")
        assert version_ids(_section(back, "facts")) == version_ids(_section(middle, "facts"))
        start = browser.get(page_link(last, "first") or "")
        assert (
            version_ids(_section(start, "facts"))[0] == version_ids(_section(pages[0], "facts"))[0]
        )

        # The account's facts they see page apart, and stay open when a link leads there.
        one = browser.get("/admin/people/giulia", params={"limit": 2})
        assert "<details>" in _section(one, "account-facts")
        later = page_link(one, "next", "account-facts")
        assert later is not None and parse_qs(urlsplit(later).query)["limit"] == ["2"]
        two = browser.get(later)
        assert "<details open>" in _section(two, "account-facts")
        assert len(version_ids(_section(two, "account-facts"))) == 1
        assert (
            set(version_ids(_section(one, "account-facts")))
            | set(version_ids(_section(two, "account-facts")))
            == shared
        )
        # Paging one list keeps the other where it was.
        assert version_ids(_section(two, "facts")) == version_ids(_section(one, "facts"))

        # A limit or a cursor the page did not give is a message naming it, as /v1 would.
        for asked, field in (
            ({"limit": 0}, "limit"),
            ({"limit": 501}, "limit"),
            ({"limit": "ten"}, "limit"),
            ({"limit": "9" * 5000}, "limit"),
            ({"cursor": "not-a-cursor"}, "cursor"),
            ({"account_cursor": "AAAA"}, "account_cursor"),
            ({"memory_cursor": "-1"}, "memory_cursor"),
            ({"held_cursor": "x"}, "held_cursor"),
        ):
            refused = browser.get("/admin/people/giulia", params=asked)
            assert refused.status_code == 422, asked
            assert message(refused).startswith(f"{field}: "), message(refused)


def test_a_persons_page_lists_their_memories_a_page_at_a_time(db_url: str, tmp_path: Path) -> None:
    laptop = Identity(GIULIA.account, GIULIA.user, "laptop-agent")
    with contextlib.closing(MemoryEngine(db_url)) as engine:
        kept = [engine.add_memory(GIULIA, f"Giulia talked about topic {n}") for n in range(4)]
        hostile = engine.add_memory(GIULIA, f"{HOSTILE} & more")
        other = engine.add_memory(laptop, "Giulia asked the laptop agent about trains")
        engine.add_memory(MARCO, "Marco likes chess")
    with running(db_url, tmp_path) as server, signed_in(server) as browser:
        page = browser.get("/admin/people/giulia", params={"limit": 2})
        said = words(_section(page, "memories"))
        # Newest first, a page of the limit, their words as text.
        assert re.findall(r'<li id="memory-(\d+)">', page.text) == [
            str(hostile.id),
            str(kept[3].id),
        ]
        assert f"{HOSTILE} & more" in said and HOSTILE not in page.text
        assert "Memories 1 to 2 of 5" in said and "Marco" not in said
        seen = []
        link = page_link(page, "next", "memories")
        while link is not None:
            later = browser.get(link)
            seen += [int(i) for i in re.findall(r'<li id="memory-(\d+)">', later.text)]
            link = page_link(later, "next", "memories")
        assert seen == [kept[2].id, kept[1].id, kept[0].id]
        # After the oldest (a cursor kept while the list shrank): nothing, and the way back.
        after = browser.get("/admin/people/giulia", params={"memory_cursor": kept[0].id})
        said = words(_section(after, "memories"))
        assert "No more memories. None after the cursor, of 5 memories" in said
        assert page_link(after, "first", "memories") == "/admin/people/giulia"
        assert page_link(after, "prev", "memories") is None  # the first page is the one before
        assert "6 memories" in words(page)  # counted over every agent
        # Another agent's: on the page of that agent, which the page links.
        assert "laptop-agent" in words(page)
        theirs = browser.get("/admin/people/giulia", params={"agent": "laptop-agent"})
        assert re.findall(r'<li id="memory-(\d+)">', theirs.text) == [str(other.id)]
        nobody = browser.get("/admin/people/nobody")
        assert "No memory of theirs through support-copilot" in words(nobody)


def test_an_export_keeps_a_non_ascii_name_in_its_file_name(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        signed_in(server) as browser,
        server.client("backend") as backend,
    ):
        for user, fallback, utf8 in (
            ("zoë", "korely-export-acme-zoe.json", "korely-export-acme-zo%C3%AB.json"),
            ("山田", "korely-export-acme-__.json", "korely-export-acme-%E5%B1%B1%E7%94%B0.json"),
            # Not letters: as before, each is "_", in the one name (a direction override
            # would show the name's end reversed).
            ('a "b"\u202egnp', "korely-export-acme-a__b__gnp.json", None),
        ):
            fact = {"key": "city", "content": "Somewhere"}
            ok(backend.post("/v1/facts", params={"user_id": user}, json=fact), 201)
            ask = browser.get(f"/admin/people/{user}/export")
            download = browser.post(f"/admin/people/{user}/export", data={"csrf": csrf_of(ask)})
            assert download.status_code == 200 and download.json()["user"] == user
            header = download.headers["content-disposition"]
            expected = f'attachment; filename="{fallback}"'
            if utf8 is not None:
                expected += f"; filename*=UTF-8''{utf8}"
            assert header == expected
            if utf8 is not None:  # the name itself, read back
                assert unquote(utf8) == f"korely-export-acme-{user}.json"


def _section(page: httpx.Response | str, name: str) -> str:
    text = page if isinstance(page, str) else page.text
    found = re.search(rf'<section id="{name}">.*?</section>', text, flags=re.S)
    assert found is not None, f"no section {name}"
    return found.group(0)


def _version(page: str, fact_id: int) -> str:
    # A version's item, up to the next version's or the list's end (its readers are a list too).
    item = (
        rf'<li class="version \w+" id="version-{fact_id}">.*?</li>\s*(?=<li class="version|</ol>)'
    )
    found = re.search(item, page, flags=re.S)
    assert found is not None, f"no version {fact_id}"
    return words(found.group(0))


def test_export_and_erase_each_ask_first(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        signed_in(server) as browser,
        server.client("giulia") as giulia,
        server.client("marco") as marco,
    ):
        story = giulias_story(server)
        ask = browser.get("/admin/people/giulia/export")
        assert ask.status_code == 200 and "Download the export" in words(ask)
        assert browser.post("/admin/people/giulia/export").status_code == 403
        download = browser.post("/admin/people/giulia/export", data={"csrf": csrf_of(ask)})
        assert download.status_code == 200
        assert download.headers["content-disposition"] == (
            'attachment; filename="korely-export-acme-giulia.json"'
        )
        export = json.loads(download.content)
        assert (export["format"], export["user"]) == ("korely-user-export/1", "giulia")
        assert {f["content"] for f in export["facts"]} >= {
            "Giulia lives in Rome",
            "Giulia lives in Milan",
        }
        assert [p["content"] for p in export["pending"]] == ["Giulia lives in Turin"]

        confirm = browser.get("/admin/people/giulia/erase")
        assert "Type the user name, giulia, to confirm" in words(confirm)
        erase = "/admin/people/giulia/erase"
        assert browser.post(erase, data={"confirm_user": "giulia"}).status_code == 403
        wrong = browser.post(erase, data={"csrf": csrf_of(confirm), "confirm_user": "Giulia"})
        assert wrong.status_code == 422
        assert message(wrong) == "The name typed is not 'giulia': nothing was erased."
        assert len(ok(giulia.get("/v1/facts"))["facts"]) == 4

        done = browser.post(erase, data={"csrf": csrf_of(confirm), "confirm_user": "giulia"})
        assert done.status_code == 200 and "giulia was erased" in words(done)
        report = words(done)
        versions = len(export["facts"]) + len(export["proposals"])  # the rejected one too
        assert f"Fact versions {versions} Memories 1" in report
        assert "Changes held for approval 1" in report
        assert "Account facts kept, under the pseudonym 1" in report
        assert [f["key"] for f in ok(giulia.get("/v1/facts"))["facts"]] == ["office-wifi"]
        assert ok(giulia.get("/v1/approvals"))["pending"] == []
        marcos = ok(marco.get("/v1/context"))["text"]
        assert WIFI["content"] in marcos  # the account's fact stays, under a pseudonym
        assert not any(story[name]["content"] in marcos for name in ("rome", "milan", "language"))
        page = words(browser.get("/admin/people/giulia"))
        assert "0 fact versions of their own" in page and "No fact of their own" in page


def test_fact_text_is_shown_as_text(db_url: str, tmp_path: Path) -> None:
    hostile_user = '<img src=x onerror="alert(1)">'
    with (
        running(db_url, tmp_path) as server,
        signed_in(server) as browser,
        server.client("backend") as backend,
    ):
        for key, scope in (("note", "user"), ("rule", "account")):
            ok(
                backend.post(
                    "/v1/facts",
                    params={"user_id": hostile_user},
                    json={"key": key, "content": f"{HOSTILE} & {key}", "scope": scope},
                ),
                201,
            )
        queue = browser.get("/admin")
        person = browser.get(f"/admin/people/{hostile_user}")
        erase = browser.get(f"/admin/people/{hostile_user}/erase")
        for page in (queue, person, erase):
            assert page.status_code == 200
            assert HOSTILE not in page.text and "<img" not in page.text
            assert hostile_user in words(page)
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; rule" in queue.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; note" in person.text
        # The name reaches links percent-encoded, and the form's value escaped.
        assert 'href="/admin/people/%3Cimg%20src%3Dx%20onerror%3D%22alert%281%29%22%3E"' in (
            queue.text
        )
        # The links to a list's other pages too, their query escaped; they lead to the page.
        paged = browser.get(f"/admin/people/{hostile_user}", params={"limit": 1})
        assert len(version_ids(paged)) == 1 and "<img" not in paged.text
        assert re.search(
            r'href="/admin/people/%3Cimg%20src%3Dx%20onerror%3D%22alert%281%29%22%3E'
            r'\?limit=1&amp;cursor=[\w=-]+#facts" rel="next"',
            paged.text,
        )
        following = page_link(paged, "next")
        assert following is not None
        second = browser.get(following)
        assert second.status_code == 200 and len(version_ids(second)) == 1
        assert set(version_ids(paged)) != set(version_ids(second))


def test_a_revoked_token_is_signed_out(db_url: str, tmp_path: Path) -> None:
    with running(db_url, tmp_path) as server, signed_in(server) as browser:
        with server.client("giulia") as giulia:
            wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
        queue = browser.get("/admin")
        assert queue.status_code == 200

        tokens = tmp_path / "tokens.json"
        write_tokens(tokens, [name for name in TOKENS if name != "admin"])
        refused = browser.post(
            f"/admin/proposals/{wifi['id']}/confirm", data={"csrf": csrf_of(queue)}
        )
        assert (refused.status_code, refused.headers["location"]) == (
            303,
            "/admin/sign-in?out=revoked",
        )
        assert not browser.cookies
        shown = browser.get(refused.headers["location"])
        assert "no longer an administrator's" in words(shown)
        with contextlib.closing(MemoryEngine(db_url)) as engine:
            assert [f.id for f in engine.proposals("acme")] == [wifi["id"]]

        # Listed again, the token signs in anew: the session it had stays ended.
        session = browser.get("/admin", follow_redirects=False)
        assert session.headers["location"] == "/admin/sign-in"
        write_tokens(tokens)
        with signed_in(server) as again:
            # An entry that stays but is no longer an administrator's ends the session too.
            demoted = {**token_entry("admin"), "admin": False}
            tokens.write_text(json.dumps({"tokens": [demoted]}))
            out = again.get("/admin")
            assert out.headers["location"] == "/admin/sign-in?out=revoked"
            assert again.post("/admin/sign-in", data={"token": ADMIN_TOKEN}).status_code == 403


def test_the_pages_reviews_and_erasures_tell_the_mcp_subscribers(
    db_url: str, tmp_path: Path
) -> None:
    """The page writes as /v1 does: a confirmed proposal is told to every subscriber of the
    account and agent, a rejected one to its proposer's, an erasure to that person's only."""
    import warnings
    from typing import Any

    import anyio
    import httpx2
    from mcp import Client, types
    from mcp.client.streamable_http import streamable_http_client

    told: dict[str, int] = {"giulia": 0, "marco": 0}

    async def subscribed(server: Any, caller: str, stack: contextlib.AsyncExitStack) -> None:
        async def collect(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                told[caller] += 1

        headers = {"Authorization": f"Bearer {TOKENS[caller][0]}"}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=60, verify=mcp_tls())
        )
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(server.url + "/mcp", http_client=http),
                mode="legacy",
                message_handler=collect,
            )
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource("korely://context")

    async def until(expected: dict[str, int]) -> None:
        with anyio.fail_after(10):
            while any(told[c] < n for c, n in expected.items()):
                await anyio.sleep(0.02)
        await anyio.sleep(0.3)  # and no more than that
        assert told == expected

    async def scenario(server: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            await subscribed(server, "giulia", stack)
            await subscribed(server, "marco", stack)
            with signed_in(server) as browser, server.client("giulia") as giulia:
                wifi = ok(giulia.post("/v1/facts", json=WIFI), 201)
                hours = ok(giulia.post("/v1/facts", json=HOURS), 201)
                await until({"giulia": 2, "marco": 0})
                csrf = csrf_of(browser.get("/admin"))
                done = browser.post(f"/admin/proposals/{wifi['id']}/confirm", data={"csrf": csrf})
                assert done.status_code == 303, done.text
                await until({"giulia": 3, "marco": 1})  # every user sees the Wi-Fi now
                done = browser.post(f"/admin/proposals/{hours['id']}/reject", data={"csrf": csrf})
                assert done.status_code == 303, done.text
                await until({"giulia": 4, "marco": 1})  # only Giulia saw it until now
                # A refused review (decided already) changed nothing and tells nothing.
                again = browser.post(f"/admin/proposals/{hours['id']}/reject", data={"csrf": csrf})
                assert again.status_code == 409
                await until({"giulia": 4, "marco": 1})
                erase = "/admin/people/marco/erase"
                csrf = csrf_of(browser.get(erase))
                done = browser.post(erase, data={"csrf": csrf, "confirm_user": "marco"})
                assert done.status_code == 200, done.text
                await until({"giulia": 4, "marco": 2})

    with running(db_url, tmp_path) as server:
        anyio.run(scenario, server)
