"""The REST API of a running `korely-server`, on SQLite and PostgreSQL: every route, for the
caller its token names, and every error as JSON with the status of its code."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from korely_memory import MemoryEngine

from .servers import GIULIA, MARCO, TLS, error_of, mcp_tls, running

HOME = {"key": "home-city", "content": "Giulia lives in Rome"}


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def test_every_route_works_for_the_person_its_token_names(db_url: str, tmp_path: Path) -> None:
    with running(db_url, tmp_path) as server, server.client("giulia") as giulia:
        rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        assert (rome["key"], rome["user"], rome["agent"]) == ("home-city", "giulia", GIULIA.agent)
        assert rome["current"] and rome["scope"] == "user"

        block = ok(giulia.get("/v1/context", params={"query": "Where does Giulia live?"}))
        assert "Giulia lives in Rome" in block["text"]
        assert block["text"] == block["stable"] + "\n\n" + block["volatile"]
        assert [f["id"] for f in block["facts"]] == [rome["id"]]
        assert block["tokens"] > 0 and block["changed"] == [] and block["omitted"] == 0

        milan = ok(
            giulia.patch(f"/v1/facts/{rome['id']}", json={"content": "Giulia lives in Milan"})
        )
        assert milan["content"] == "Giulia lives in Milan" and milan["id"] != rome["id"]
        history = ok(giulia.get(f"/v1/facts/{rome['id']}/history"))["facts"]
        assert [f["content"] for f in history] == ["Giulia lives in Rome", "Giulia lives in Milan"]
        assert (
            history[0]["end_cause"] == "corrected" and history[0]["replaced_by_id"] == milan["id"]
        )

        kept = ok(
            giulia.post("/v1/memories", json={"content": "Giulia asked about trains to Turin"}), 201
        )
        found = ok(giulia.post("/v1/memories/search", json={"query": "trains Turin"}))["memories"]
        assert [m["id"] for m in found] == [kept["id"]]
        both = ok(giulia.post("/v1/search", json={"query": "Milan trains"}))
        assert [f["id"] for f in both["facts"]] == [milan["id"]]
        assert [m["id"] for m in both["memories"]] == [kept["id"]]
        gone = ok(giulia.post(f"/v1/memories/{kept['id']}/forget"))
        assert gone["id"] == kept["id"]
        assert ok(giulia.post("/v1/memories/search", json={"query": "trains Turin"})) == {
            "memories": []
        }

        ended = ok(giulia.post(f"/v1/facts/{milan['id']}/forget", json={"erase": True}))["fact"]
        assert ended["id"] == milan["id"] and ended["end_cause"] == "erased"
        assert ok(giulia.get("/v1/facts"))["facts"] == []
        every = ok(giulia.get("/v1/facts", params={"include_invalidated": "true"}))["facts"]
        assert {f["id"] for f in every} == {rome["id"], milan["id"]}
        assert all(f["content"] is None for f in every)  # erased: every version's words

        ok(giulia.post("/v1/facts", json={"key": "team", "content": "Giulia is in support"}), 201)
        exported = ok(giulia.get("/v1/users/giulia/export"))
        assert exported["user"] == "giulia"
        assert [f["content"] for f in exported["facts"] if f["content"]] == ["Giulia is in support"]
        assert ok(giulia.get("/v1/approvals")) == {"pending": []}

        report = ok(giulia.delete("/v1/users/giulia"))
        assert report["facts"] == 3 and report["pseudonym"]
        assert ok(giulia.get("/v1/facts", params={"include_invalidated": "true"}))["facts"] == []


def test_the_facts_are_listed_a_page_at_a_time_each_once(sqlite_url: str, tmp_path: Path) -> None:
    # 300 facts, and another person's 300 beside them.
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        for n in range(300):
            engine.remember(GIULIA, f"k{n:03}", f"fact {n}")
            engine.remember(MARCO, f"k{n:03}", f"Marco's fact {n}")
    with running(sqlite_url, tmp_path) as server, server.client("giulia") as giulia:
        first = ok(giulia.get("/v1/facts", params={"limit": 100}))
        # A fact corrected between pages keeps its place; one added before the cursor is not
        # shown, one after it is.
        [k001] = [f for f in first["facts"] if f["key"] == "k001"]
        ok(giulia.patch(f"/v1/facts/{k001['id']}", json={"content": "fact 1, corrected"}))
        ok(giulia.post("/v1/facts", json={"key": "k000a", "content": "before the cursor"}), 201)
        ok(giulia.post("/v1/facts", json={"key": "k999", "content": "after the cursor"}), 201)
        shown, page = first["facts"], first
        while page["next_cursor"] is not None:
            page = ok(giulia.get("/v1/facts", params={"limit": 100, "cursor": page["next_cursor"]}))
            shown += page["facts"]
        assert [f["key"] for f in shown] == [f"k{n:03}" for n in range(300)] + ["k999"]
        assert {f["user"] for f in shown} == {"giulia"}
        bad = giulia.get("/v1/facts", params={"cursor": "not a cursor"})
        assert bad.status_code == 422 and error_of(bad)["field"] == "cursor"


def test_identity_comes_from_the_token_never_from_the_request(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("marco") as marco,
        server.client("backend") as backend,
        server.client("other") as other,
    ):
        ok(giulia.post("/v1/facts", json=HOME), 201)
        # A person's token reaches that person only, whatever the request names.
        refused = giulia.get("/v1/facts", params={"user_id": "marco"})
        assert refused.status_code == 403 and error_of(refused)["code"] == "forbidden"
        assert ok(giulia.get("/v1/facts", params={"user_id": "giulia"}))["facts"]
        assert ok(marco.get("/v1/facts"))["facts"] == []
        sneaky = marco.post("/v1/facts", json={**HOME, "user_id": "giulia", "account": "acme"})
        assert sneaky.status_code == 422 and error_of(sneaky)["code"] == "invalid_request"
        for route in ("/v1/users/giulia/export", "/v1/users/giulia/"):
            assert marco.get(route).status_code in (403, 405)  # 405: DELETE erases
        assert marco.delete("/v1/users/giulia").status_code == 403
        assert marco.delete("/v1/agents/giulia-laptop").status_code == 403

        # A backend's token names the person in each request, and must name one.
        unnamed = backend.get("/v1/facts")
        assert unnamed.status_code == 422 and error_of(unnamed)["field"] == "user_id"
        [seen] = ok(backend.get("/v1/facts", params={"user_id": "giulia"}))["facts"]
        assert seen["content"] == HOME["content"]
        ok(backend.post("/v1/facts", params={"user_id": "marco"}, json=HOME), 201)
        assert [f["user"] for f in ok(marco.get("/v1/facts"))["facts"]] == ["marco"]
        # ...of its own account only: the same name elsewhere is someone else.
        assert ok(other.get("/v1/facts", params={"user_id": "giulia"}))["facts"] == []

        # Review is for administrators.
        for caller in (giulia, backend):
            assert caller.get("/v1/proposals").status_code == 403
            assert caller.post("/v1/proposals/1/confirm").status_code == 403


def test_an_unknown_query_parameter_is_refused_on_every_route_naming_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    from korely_server.api import router

    with (
        running(sqlite_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("backend") as backend,
        server.client("admin") as admin,
    ):
        rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        ok(giulia.get("/v1/context"))  # giulia-laptop is handed Rome: a read mark
        # The read marks are the reader's: naming a user there must not pass for choosing
        # whose marks go (it would delete Giulia's laptop's, not a mark about Marco).
        refused = backend.delete("/v1/agents/giulia-laptop", params={"user_id": "marco"})
        assert refused.status_code == 422, refused.text
        error = error_of(refused)
        assert (error["code"], error["field"]) == ("invalid_request", "user_id")
        said = "user_id: is not a query parameter of /v1/agents/{agent_id}: it takes none"
        assert error["message"] == said
        with contextlib.closing(MemoryEngine(server.database)) as engine:
            marks = engine.export_user(GIULIA.account, "giulia").marks
        assert [(m.reader, m.fact_id) for m in marks] == [("giulia-laptop", rome["id"])]

        # Every route, whatever its method: a parameter it does not take is a 422 naming it,
        # before anything is read or written.
        routes = [r for r in router.routes if r.path != "/v1/{rest:path}"]  # type: ignore[attr-defined]
        assert len(routes) == 19
        for route in routes:
            path = route.path.replace("{agent_id:path}", "giulia-laptop")  # type: ignore[attr-defined]
            path = path.replace("{user_id:path}", "giulia")
            path = path.replace("{fact_id}", str(rome["id"])).replace("{memory_id}", "1")
            path = path.replace("{pending_id}", "1")
            for method in route.methods:  # type: ignore[attr-defined]
                answer = admin.request(method, path, params={"user": "marco"})
                assert answer.status_code == 422, (method, path, answer.text)
                error = error_of(answer)
                assert (error["code"], error["field"]) == ("invalid_request", "user"), error
        typo = giulia.get("/v1/facts", params={"include_invalidate": "true"})
        assert error_of(typo)["field"] == "include_invalidate"
        assert "include_invalidated" in error_of(typo)["message"]  # the names it takes
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        assert [f.id for f in engine.get_facts(GIULIA, include_invalidated=True)] == [rome["id"]]
        assert engine.export_user(GIULIA.account, "giulia").marks != ()


def test_erasing_an_administrator_takes_an_administrator_s_token_or_their_own(
    sqlite_url: str, tmp_path: Path
) -> None:
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        engine.grant_admin("acme", "bea")  # a second administrator of the account
        engine.remember(MARCO, "team", "Marco works on billing")
    with (
        running(sqlite_url, tmp_path) as server,
        server.client("backend") as backend,
        server.client("admin") as admin,
    ):
        for name in ("ada", "bea"):
            refused = backend.delete(f"/v1/users/{name}")
            assert refused.status_code == 403, refused.text
            assert error_of(refused)["message"] == (
                f"'{name}' administers 'acme': erasing an administrator takes an "
                "administrator's token, or their own"
            )
        with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
            assert engine.is_admin("acme", "ada") and engine.is_admin("acme", "bea")
        # A person who administers nothing is the backend's to erase, as before.
        assert ok(backend.delete("/v1/users/marco"))["facts"] == 1
        # An administrator may erase another; the report counts the grant that went with her.
        assert ok(admin.delete("/v1/users/bea"))["admin_grants"] == 1
        # And an administrator may erase herself, with her own token.
        assert ok(admin.delete("/v1/users/ada"))["admin_grants"] == 1
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        assert not engine.is_admin("acme", "bea") and not engine.is_admin("acme", "ada")
        assert engine.get_facts(MARCO) == []


def test_stored_text_is_kept_without_terminal_or_bidi_controls_as_through_mcp(
    sqlite_url: str, tmp_path: Path
) -> None:
    from korely_mcp import Caller, KorelyTools

    hostile = "Giulia lives in\u202e Rome\u2066,\x1b[2J\x9b31m near\u200f the\tstation\n"
    kept = "Giulia lives in Rome, [2J 31m near the\tstation"
    with running(sqlite_url, tmp_path) as server, server.client("giulia") as giulia:
        made = ok(giulia.post("/v1/facts", json={"key": "home-city", "content": hostile}), 201)
        assert made["content"] == kept
        listed = ok(giulia.get("/v1/facts"))["facts"]
        assert [f["content"] for f in listed] == [kept]
        memory = ok(giulia.post("/v1/memories", json={"content": hostile}), 201)
        assert memory["content"] == kept
        only = giulia.post("/v1/facts", json={"key": "x", "content": "\u202e\x1b"})
        assert only.status_code == 422
        assert error_of(only)["message"] == "content: must not be empty"
    with MemoryEngine(sqlite_url) as engine:
        # The same words written through an MCP tool are kept the same.
        tools = KorelyTools(engine)
        written = anyio_run(
            tools.call,
            Caller(MARCO, "marco-laptop"),
            "korely_remember",
            {"key": "home-city", "content": hostile},
        )
        assert not written.is_error
        assert [f.content for f in engine.get_facts(MARCO)] == [kept]


def anyio_run(*args: Any) -> Any:
    import anyio

    return anyio.run(*args)


def test_a_request_without_a_known_token_is_a_401_whatever_its_query(
    sqlite_url: str, tmp_path: Path
) -> None:
    from korely_server.api import router

    with (
        running(sqlite_url, tmp_path) as server,
        server.client(None) as anonymous,
        server.client("giulia") as giulia,
    ):
        rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        wrong = {"Authorization": "Bearer ksrv_nobody-" + "n" * 32}
        routes = [r for r in router.routes if r.path != "/v1/{rest:path}"]  # type: ignore[attr-defined]
        for route in routes:
            path = route.path.replace("{agent_id:path}", "giulia-laptop")  # type: ignore[attr-defined]
            path = path.replace("{user_id:path}", "giulia")
            path = path.replace("{fact_id}", str(rome["id"])).replace("{memory_id}", "1")
            path = path.replace("{pending_id}", "1")
            for method in route.methods:  # type: ignore[attr-defined]
                for headers in ({}, wrong):
                    # An unknown parameter, and one a route takes with a value it refuses: the
                    # caller is not told the route's names nor its rules before it is known.
                    for params in ({"user": "marco"}, {"limit": "0", "user_id": "a/b"}):
                        answer = anonymous.request(method, path, params=params, headers=headers)
                        assert answer.status_code == 401, (method, path, params, answer.text)
                        assert error_of(answer)["code"] == "unauthorized"
                        assert "takes" not in answer.text
        # A body that is not JSON, or not the route's, is read before the route: still a 401.
        for body in (b"{not json", b'{"key": 1}'):
            for headers in ({}, wrong):
                headers = {**headers, "Content-Type": "application/json"}
                answer = anonymous.post("/v1/facts", content=body, headers=headers)
                assert answer.status_code == 401, (body, answer.text)
        # A known token still has the unknown parameter named.
        refused = giulia.get("/v1/facts", params={"user": "marco"})
        assert refused.status_code == 422 and error_of(refused)["field"] == "user"
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        assert [f.id for f in engine.get_facts(GIULIA, include_invalidated=True)] == [rome["id"]]


def test_a_reader_is_told_of_a_change_once(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("backend", params={"user_id": "giulia"}) as backend,
    ):
        rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        # A backend serving many clients reads under each one's name; a person's token reads
        # under its own only (another name's notices are another client's to be told).
        ok(backend.get("/v1/context", params={"reader": "giulia-phone"}))
        refused = giulia.get("/v1/context", params={"reader": "giulia-phone"})
        assert refused.status_code == 403 and error_of(refused)["code"] == "forbidden"
        assert giulia.get("/v1/facts", params={"reader": "giulia-phone"}).status_code == 403
        assert giulia.get("/v1/context", params={"reader": "giulia-laptop"}).status_code == 200
        ok(giulia.patch(f"/v1/facts/{rome['id']}", json={"content": "Giulia lives in Milan"}))
        told = ok(backend.get("/v1/context", params={"reader": "giulia-phone"}))
        [change] = told["changed"]
        assert change["was"]["content"] == "Giulia lives in Rome"
        assert change["now"]["content"] == "Giulia lives in Milan"
        assert change["cause"] == "corrected"
        assert "Changed since you last read" in told["text"]
        again = ok(backend.get("/v1/context", params={"reader": "giulia-phone"}))
        assert again["changed"] == [] and "Milan" in again["text"]
        # The writer's own reader is not told of its own change.
        assert ok(giulia.get("/v1/context"))["changed"] == []

        # Read marks are the reader's, whoever they are about: the route takes no user_id.
        with server.client("backend") as names_no_user:
            marks = ok(names_no_user.delete("/v1/agents/giulia-phone"))
        assert marks["read_marks_deleted"] >= 1
        engine = MemoryEngine(server.database)
        try:
            assert engine.delete_reader(GIULIA.account, "giulia-phone") == 0
        finally:
            engine.close()


def test_the_review_queue_is_served_to_administrators(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("marco") as marco,
        server.client("admin") as admin,
    ):
        wifi = {"key": "wifi", "content": "The office wifi is acme-guest", "scope": "account"}
        proposed = ok(giulia.post("/v1/facts", json=wifi), 201)
        assert proposed["scope"] == "account_proposed"
        hours = {"key": "hours", "content": "The office opens at 9", "scope": "account"}
        other = ok(giulia.post("/v1/facts", json=hours), 201)
        queue = ok(admin.get("/v1/proposals"))["facts"]
        assert [f["id"] for f in queue] == [proposed["id"], other["id"]]
        assert "acme-guest" not in ok(marco.get("/v1/context"))["text"]

        confirmed = ok(admin.post(f"/v1/proposals/{proposed['id']}/confirm"))
        assert (confirmed["scope"], confirmed["confirmed_by"]) == ("account", "ada")
        rejected = ok(admin.post(f"/v1/proposals/{other['id']}/reject"))
        assert rejected["scope"] == "account_rejected" and not rejected["current"]
        text = ok(marco.get("/v1/context"))["text"]
        assert "acme-guest" in text and "opens at 9" not in text
        assert ok(admin.get("/v1/proposals"))["facts"] == []
        # A review is decided once: a second decision is a 409, however it was decided.
        for fact_id, decided in ((other["id"], "rejected"), (proposed["id"], "confirmed")):
            for verb in ("confirm", "reject"):
                again = admin.post(f"/v1/proposals/{fact_id}/{verb}")
                assert again.status_code == 409, again.text
                assert error_of(again)["code"] == "already_decided"
                assert f"was {decided} by ada" in error_of(again)["message"]
        assert "acme-guest" in ok(marco.get("/v1/context"))["text"]
        missing = admin.post("/v1/proposals/999999/confirm")
        assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"


def test_an_admin_token_whose_user_the_engine_does_not_list_reviews_nothing(
    sqlite_url: str, tmp_path: Path
) -> None:
    with (
        running(sqlite_url, tmp_path, admin=False) as server,
        server.client("giulia") as giulia,
        server.client("admin") as admin,
    ):
        wifi = {"key": "wifi", "content": "The office wifi is acme-guest", "scope": "account"}
        proposed = ok(giulia.post("/v1/facts", json=wifi), 201)
        refused = admin.post(f"/v1/proposals/{proposed['id']}/confirm")
        assert refused.status_code == 403 and "not an administrator" in error_of(refused)["message"]
        assert ok(admin.get("/v1/proposals"))["facts"][0]["scope"] == "account_proposed"


@pytest.mark.parametrize(
    ("user_id", "says"),
    [
        ("", "must not be empty"),
        (".", "must not be"),
        ("..", "must not be"),
        ("a\x01b", "control"),
        ("x" * 256, "255"),
    ],
)
def test_a_name_that_breaks_the_rule_is_a_422_naming_the_field(
    sqlite_url: str, tmp_path: Path, user_id: str, says: str
) -> None:
    with running(sqlite_url, tmp_path) as server, server.client("backend") as backend:
        for answer in (
            backend.get("/v1/facts", params={"user_id": user_id}),
            backend.post("/v1/facts", params={"user_id": user_id}, json=HOME),
        ):
            assert answer.status_code == 422, answer.text
            error = error_of(answer)
            assert (error["code"], error["field"]) == ("invalid_request", "user_id"), error
            assert says in error["message"]
        slash = backend.get("/v1/users/a/b/export")
        assert slash.status_code == 422 and "'/'" in error_of(slash)["message"]
        assert backend.delete("/v1/users/a%2Fb").status_code == 422
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        assert engine.export_user("acme", "x").facts == ()


def test_every_error_is_json_with_the_status_of_its_code(db_url: str, tmp_path: Path) -> None:
    with (
        running(db_url, tmp_path, "--max-facts", "2") as server,
        server.client("giulia") as giulia,
        server.client(None) as anonymous,
    ):
        for answer in (
            anonymous.get("/v1/context"),
            anonymous.post("/v1/facts", json=HOME),
            httpx.get(
                server.url + "/v1/facts", headers={"Authorization": "Bearer nope"}, verify=TLS
            ),
            httpx.get(
                server.url + "/v1/facts", headers={"Authorization": "Basic Z2l1bGlh"}, verify=TLS
            ),
        ):
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
            assert error_of(answer)["code"] == "unauthorized"
        assert ok(giulia.get("/v1/facts")) == {"facts": [], "next_cursor": None}  # nothing written

        rome = ok(giulia.post("/v1/facts", json=HOME), 201)
        ended = ok(giulia.patch(f"/v1/facts/{rome['id']}", json={"content": "In Milan"}))
        stale = giulia.patch(f"/v1/facts/{rome['id']}", json={"content": "In Turin"})
        assert stale.status_code == 409 and error_of(stale)["code"] == "fact_not_current"
        assert stale.headers["location"] == f"/v1/facts/{ended['id']}"
        assert giulia.post(f"/v1/facts/{rome['id']}/forget").status_code == 409

        cases: list[tuple[httpx.Response, int, str, str | None]] = [
            (giulia.get("/v1/facts/424242/history"), 404, "not_found", None),
            (giulia.post("/v1/memories/424242/forget"), 404, "not_found", None),
            (giulia.get("/v1/no-such-route"), 404, "not_found", None),
            (giulia.get("/v1/facts/abc/history"), 422, "invalid_request", "fact_id"),
            (
                giulia.get("/v1/context", params={"token_budget": 5}),
                422,
                "invalid_request",
                "token_budget",
            ),
            (
                giulia.get("/v1/context", params={"as_of": "someday"}),
                422,
                "invalid_request",
                "as_of",
            ),
            (
                giulia.get("/v1/context", params={"changes": "moved"}),
                422,
                "invalid_request",
                "changes",
            ),
            (
                giulia.post("/v1/facts", json={"key": "", "content": "x"}),
                422,
                "invalid_request",
                "key",
            ),
            (giulia.post("/v1/facts", json={"content": "x"}), 422, "invalid_request", "key"),
            (
                giulia.post(
                    "/v1/facts", content=b"{not json", headers={"content-type": "application/json"}
                ),
                422,
                "invalid_request",
                None,
            ),
            (
                giulia.post("/v1/facts", json={**HOME, "scope": "everyone"}),
                422,
                "invalid_request",
                "scope",
            ),
            (giulia.get("/v1/facts", params={"limit": 0}), 422, "invalid_request", "limit"),
            (
                giulia.post("/v1/search", json={"query": "x", "limit": 10**9}),
                422,
                "invalid_request",
                "limit",
            ),
            (
                giulia.patch(f"/v1/facts/{2**63}", json={"content": "x"}),
                422,
                "invalid_request",
                "fact_id",
            ),
            (
                giulia.post(f"/v1/facts/{ended['id']}/forget", json={"erase": "on"}),
                422,
                "invalid_request",
                "erase",
            ),
            (
                giulia.post(
                    "/v1/facts",
                    content=b"[" * 100_000,
                    headers={"content-type": "application/json"},
                ),
                422,
                "invalid_request",
                None,
            ),
            (giulia.put("/v1/facts"), 405, "method_not_allowed", None),
            (giulia.options("/v1/facts"), 405, "method_not_allowed", None),
            (giulia.options("/v1/elsewhere"), 404, "not_found", None),
        ]
        ok(giulia.post("/v1/facts", json={"key": "team", "content": "Support"}), 201)
        cases.append(
            (
                giulia.post("/v1/facts", json={"key": "third", "content": "x"}),
                422,
                "limit_exceeded",
                None,
            )
        )
        for answer, status, code, field in cases:
            error = error_of(answer)
            assert (answer.status_code, error["code"]) == (status, code), answer.text
            if field is not None:
                assert error["field"] == field, error
        assert {f["key"] for f in ok(giulia.get("/v1/facts"))["facts"]} == {"home-city", "team"}


def test_a_database_failure_is_a_503_with_a_neutral_message(
    postgresql_url: str, tmp_path: Path
) -> None:
    with running(postgresql_url, tmp_path) as server, server.client("giulia") as giulia:
        ok(giulia.post("/v1/facts", json=HOME), 201)
        database = sa.create_engine(postgresql_url)
        try:
            with database.begin() as conn:
                conn.execute(sa.text("ALTER TABLE korely_facts RENAME TO korely_facts_away"))
            failed = giulia.get("/v1/context")
            with database.begin() as conn:
                conn.execute(sa.text("ALTER TABLE korely_facts_away RENAME TO korely_facts"))
        finally:
            database.dispose()
        assert failed.status_code == 503, failed.text
        error = error_of(failed)
        assert error["code"] == "unavailable" and "korely_facts" not in error["message"]
        assert "korely_facts" in server.log.read_text()  # the cause is logged
        assert "Rome" in ok(giulia.get("/v1/context"))["text"]  # and the server goes on


def test_host_and_origin_are_checked_against_dns_rebinding(sqlite_url: str, tmp_path: Path) -> None:
    with running(sqlite_url, tmp_path) as server, server.client("giulia") as giulia:
        assert server.url.startswith("http://127.0.0.1:")  # loopback, unless told otherwise
        assert giulia.get("/v1/facts").status_code == 200
        assert giulia.get("/v1/facts", headers={"Host": "evil.example"}).status_code == 421
        foreign = giulia.get("/v1/facts", headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        posted = giulia.post("/v1/facts", json=HOME, headers={"Origin": "http://evil.example"})
        assert posted.status_code == 403
        own = server.url.replace("127.0.0.1", "localhost")
        assert giulia.get("/v1/facts", headers={"Origin": own}).status_code == 200
        for bare in ("localhost", "127.0.0.1", "[::1]"):  # port 80, or a proxy, sends no port
            assert giulia.get("/v1/facts", headers={"Host": bare}).status_code == 200
    with (
        running(sqlite_url, tmp_path, "--allowed-host", "memory.example") as server,
        server.client("giulia") as giulia,
    ):
        assert giulia.get("/v1/facts", headers={"Host": "memory.example"}).status_code == 200
        origin = {"Origin": "https://memory.example", "Host": "memory.example"}
        assert giulia.get("/v1/facts", headers=origin).status_code == 200
        assert giulia.get("/v1/facts", headers={"Host": "evil.example"}).status_code == 421
    with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
        assert engine.get_facts(GIULIA) == []  # the refused write wrote nothing


def test_the_openapi_schema_lists_every_route(sqlite_url: str, tmp_path: Path) -> None:
    with running(sqlite_url, tmp_path) as server, server.client(None) as anonymous:
        schema = ok(anonymous.get("/openapi.json"))
    routes = {(path, method) for path, item in schema["paths"].items() for method in item}
    assert routes == {
        ("/v1/context", "get"),
        ("/v1/facts", "get"),
        ("/v1/facts", "post"),
        ("/v1/facts/{fact_id}", "patch"),
        ("/v1/facts/{fact_id}/forget", "post"),
        ("/v1/facts/{fact_id}/history", "get"),
        ("/v1/memories", "post"),
        ("/v1/memories/search", "post"),
        ("/v1/memories/{memory_id}/forget", "post"),
        ("/v1/search", "post"),
        ("/v1/agents/{agent_id}", "delete"),
        ("/v1/users/{user_id}", "delete"),
        ("/v1/users/{user_id}/export", "get"),
        ("/v1/proposals", "get"),
        ("/v1/proposals/{fact_id}/confirm", "post"),
        ("/v1/proposals/{fact_id}/reject", "post"),
        ("/v1/approvals", "get"),
        ("/v1/approvals/{pending_id}/approve", "post"),
        ("/v1/approvals/{pending_id}/decline", "post"),
    }
    error = schema["components"]["schemas"]["ErrorOut"]
    assert error["properties"]["error"]["$ref"].endswith("/ErrorDetail")


def test_mcp_is_served_beside_the_api_with_the_same_tokens(db_url: str, tmp_path: Path) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    with running(db_url, tmp_path) as server, server.client("giulia") as giulia:
        ok(giulia.post("/v1/facts", json=HOME), 201)

        async def call(caller: str) -> tuple[bool, str]:
            from .servers import TOKENS

            headers = {"Authorization": f"Bearer {TOKENS[caller][0]}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60, verify=mcp_tls()) as http,
                Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client,
            ):
                result = await client.call_tool("korely_get_context", {"query": "home"})
                [content] = result.content
                assert content.type == "text"
                return bool(result.is_error), content.text

        error, text = anyio.run(call, "giulia")
        assert not error and "Giulia lives in Rome" in text
        error, text = anyio.run(call, "marco")
        assert not error and "Rome" not in text
        error, text = anyio.run(call, "backend")
        assert error and "any user of the account" in text
        refused = httpx.post(server.url + "/mcp", json={}, verify=TLS)
        assert refused.status_code == 401


def test_writes_through_the_api_tell_the_mcp_subscribers_whose_block_they_change(
    db_url: str, tmp_path: Path
) -> None:
    import warnings

    import anyio
    import httpx2
    from mcp import Client, types
    from mcp.client.streamable_http import streamable_http_client

    from .servers import TOKENS

    told: dict[str, int] = {"giulia": 0, "marco": 0}

    async def subscribed(server: Any, caller: str, stack: contextlib.AsyncExitStack) -> None:
        async def collect(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                assert str(message.params.uri) == "korely://context"
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
        with warnings.catch_warnings():  # the 2025 protocol's way, deprecated by the SDK
            warnings.simplefilter("ignore")
            await client.subscribe_resource("korely://context")

    async def until(caller: str, count: int) -> None:
        with anyio.fail_after(10):
            while told[caller] < count:
                await anyio.sleep(0.02)

    async def scenario(server: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            await subscribed(server, "giulia", stack)
            await subscribed(server, "marco", stack)
            with (
                server.client("backend", params={"user_id": "giulia"}) as backend,
                server.client("giulia") as giulia,
                server.client("admin") as admin,
            ):
                # A backend writes Giulia's fact: her subscriber is told, Marco's is not.
                rome = ok(backend.post("/v1/facts", json=HOME), 201)
                await until("giulia", 1)
                # A refused write changed nothing and tells nothing.
                refused = backend.post("/v1/facts", json={"key": "", "content": "x"})
                assert refused.status_code == 422
                fixed = {"content": "Giulia lives in Milan"}
                ok(giulia.patch(f"/v1/facts/{rome['id']}", json=fixed))
                await until("giulia", 2)
                ok(backend.post("/v1/memories", json={"content": "Giulia asked about trains"}), 201)
                await until("giulia", 3)
                await anyio.sleep(0.3)
                assert told == {"giulia": 3, "marco": 0}
                # A proposal is its proposer's until confirmed; then every user sees it.
                wifi = {"key": "wifi", "content": "The wifi is acme-guest", "scope": "account"}
                proposed = ok(giulia.post("/v1/facts", json=wifi), 201)
                await until("giulia", 4)
                assert told["marco"] == 0
                ok(admin.post(f"/v1/proposals/{proposed['id']}/confirm"))
                await until("giulia", 5)
                await until("marco", 1)
                # Erasing Marco tells Marco's subscriber (his memory is gone), not Giulia's.
                ok(admin.delete("/v1/users/marco"))
                await until("marco", 2)
                await anyio.sleep(0.3)
                assert told == {"giulia": 5, "marco": 2}

    with running(db_url, tmp_path) as server:
        anyio.run(scenario, server)


def test_approving_after_the_key_was_written_since_is_a_409(db_url: str, tmp_path: Path) -> None:
    """Rome is held for Giulia's approval; the CRM then writes Naples. Approving Rome would
    overwrite Naples: 409 ``fact_not_current`` naming Naples, and Rome stays held."""
    from korely_memory import Operation

    def extractor(messages: Any, known: Any) -> list[Operation]:
        return [Operation("record", "home-city", "Giulia lives in Rome")]

    with contextlib.closing(MemoryEngine(db_url)) as engine:
        said = [("user", "I live in Rome")]
        engine.capture(GIULIA, said, extractor=extractor, hold_for_owner=True)
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("backend") as backend,
    ):
        (held,) = ok(giulia.get("/v1/approvals"))["pending"]
        assert held["drawn_against"] is None  # the key held nothing when it was captured
        naples = {"key": "home-city", "content": "Giulia lives in Naples"}
        written = ok(backend.post("/v1/facts", params={"user_id": "giulia"}, json=naples), 201)

        refused = giulia.post(f"/v1/approvals/{held['id']}/approve")

        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "fact_not_current"
        assert refused.headers["Location"] == f"/v1/facts/{written['id']}"
        assert ok(giulia.get("/v1/approvals"))["pending"] == [held]
        text = ok(backend.get("/v1/context", params={"user_id": "giulia"}))["text"]
        assert "Giulia lives in Naples" in text and "Rome" not in text
        assert ok(giulia.post(f"/v1/approvals/{held['id']}/decline"))["key"] == "home-city"


def test_captured_facts_wait_for_the_persons_approval(db_url: str, tmp_path: Path) -> None:
    from korely_memory import Operation

    def extractor(messages: Any, known: Any) -> list[Operation]:
        return [
            Operation("record", "home-city", "Giulia lives in Rome"),
            Operation("record", "pet", "Giulia has a cat"),
        ]

    with contextlib.closing(MemoryEngine(db_url)) as engine:
        said = [("user", "I live in Rome and I have a cat")]
        engine.capture(GIULIA, said, extractor=extractor, hold_for_owner=True)
    with (
        running(db_url, tmp_path) as server,
        server.client("giulia") as giulia,
        server.client("marco") as marco,
        server.client("backend") as backend,
    ):
        held = ok(giulia.get("/v1/approvals"))["pending"]
        assert [(p["key"], p["operation"]) for p in held] == [
            ("home-city", "remember"),
            ("pet", "remember"),
        ]
        assert "Rome" not in ok(giulia.get("/v1/context"))["text"]
        home, pet = (p["id"] for p in held)
        # Another person cannot see, approve or decline them.
        assert ok(marco.get("/v1/approvals")) == {"pending": []}
        for route in (f"/v1/approvals/{home}/approve", f"/v1/approvals/{home}/decline"):
            assert marco.post(route).status_code == 404
        # Nor can the backend that captured them, or an administrator: it is the person's act.
        with server.client("admin") as admin:
            for caller in (backend, admin):
                for route in (f"/v1/approvals/{home}/approve", f"/v1/approvals/{pet}/decline"):
                    refused = caller.post(route, params={"user_id": "giulia"})
                    assert refused.status_code == 403, refused.text
                listed = ok(caller.get("/v1/approvals", params={"user_id": "giulia"}))["pending"]
                assert len(listed) == 2
        # The person approves one and declines the other.
        written = ok(giulia.post(f"/v1/approvals/{home}/approve"))["fact"]
        assert (written["key"], written["content"]) == ("home-city", "Giulia lives in Rome")
        assert ok(giulia.post(f"/v1/approvals/{pet}/decline"))["key"] == "pet"
        assert ok(giulia.get("/v1/approvals")) == {"pending": []}
        assert giulia.post(f"/v1/approvals/{home}/approve").status_code == 404
        text = ok(backend.get("/v1/context", params={"user_id": "giulia"}))["text"]
        assert "Giulia lives in Rome" in text and "cat" not in text
