"""The server under load: 20 clients at once, 50 calls each, on loopback. Not one call is
refused, and every write the server acknowledged is there afterwards, through the API and in the
database read by an engine of its own.

The clients are threads, each with its own HTTP connection. Most are the application's backend,
each naming its own person; Giulia and Marco are each written by two clients at once, their own
token's and the backend's. The times are `benchmarks/server_load.py`'s to measure.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from korely_memory import Identity, MemoryEngine

from .servers import ACCOUNT, AGENT, Server, running

CALLS = 50  # per client: ROUNDS x (remember, correct, get_context, get_facts, search)
ROUNDS = CALLS // 5
# (token, user_id): 16 people through the backend, and Giulia and Marco, each by their own
# token and by the backend at the same time.
SEATS = [
    *[("backend", f"load-{n:02d}") for n in range(16)],
    ("giulia", None),
    ("backend", "giulia"),
    ("marco", None),
    ("backend", "marco"),
]
CLIENTS = len(SEATS)


@dataclass
class Written:
    """One write the server acknowledged: its key, the version's id and its words."""

    user: str
    key: str
    fact_id: int
    content: str


@dataclass
class Client:
    """What one client did: the writes acknowledged, and every call that was not a 2xx."""

    seat: int
    written: list[Written] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    calls: int = 0


def user_of(seat: int) -> str:
    token, user_id = SEATS[seat]
    return user_id or token


@contextlib.contextmanager
def client_for(server: Server, seat: int) -> Iterator[httpx.Client]:
    token, user_id = SEATS[seat]
    params = {} if user_id is None else {"user_id": user_id}
    with server.client(token, params=params) as http:
        yield http


def drive(server: Server, seat: int, start: threading.Barrier) -> Client:
    """One client's 50 calls: each round remembers a key of its own and corrects it, then reads."""
    done = Client(seat)
    user = user_of(seat)

    def call(method: str, path: str, **kwargs: object) -> httpx.Response | None:
        done.calls += 1
        try:
            response = http.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as error:
            done.failures.append(f"{method} {path}: {error!r}")
            return None
        if not response.is_success:
            done.failures.append(f"{method} {path}: {response.status_code} {response.text[:300]}")
            return None
        return response

    with client_for(server, seat) as http:
        start.wait()
        for r in range(ROUNDS):
            key = f"seat-{seat:02d}-item-{r:02d}"
            content = f"{user} keeps item {r} in drawer {seat}"
            made = call("POST", "/v1/facts", json={"key": key, "content": content})
            if made is not None:
                done.written.append(Written(user, key, made.json()["id"], content))
                fixed = f"{user} moved item {r} to shelf {seat}"
                ended = call("PATCH", f"/v1/facts/{made.json()['id']}", json={"content": fixed})
                if ended is not None:
                    done.written.append(Written(user, key, ended.json()["id"], fixed))
            call("GET", "/v1/context", params={"query": f"Where is item {r}?"})
            call("GET", "/v1/facts", params={"limit": 50})
            call("POST", "/v1/search", json={"query": f"item {r} shelf", "limit": 5})
    return done


def load(server: Server) -> list[Client]:
    start = threading.Barrier(CLIENTS)
    with ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(drive, server, seat, start) for seat in range(CLIENTS)]
        return [future.result() for future in futures]


def versions_through_the_api(server: Server, seat: int) -> dict[int, tuple[str, str | None]]:
    """Every version the person of ``seat`` has, by id: (key, words), read page by page."""
    found: dict[int, tuple[str, str | None]] = {}
    with client_for(server, seat) as http:
        cursor = None
        while True:
            params: dict[str, object] = {"include_invalidated": True, "limit": 500}
            if cursor is not None:
                params["cursor"] = cursor
            page = http.get("/v1/facts", params=params)  # type: ignore[arg-type]
            assert page.status_code == 200, page.text
            for fact in page.json()["facts"]:
                found[fact["id"]] = (fact["key"], fact["content"])
            cursor = page.json()["next_cursor"]
            if cursor is None:
                return found


@pytest.mark.timeout(120)
def test_twenty_clients_at_once_are_all_served_and_every_write_is_kept(
    db_url: str, tmp_path: Path
) -> None:
    with running(db_url, tmp_path) as server:
        clients = load(server)
        failures = [f"client {c.seat}: {f}" for c in clients for f in c.failures]
        assert failures == [], "\n".join(failures[:20])
        assert sum(c.calls for c in clients) == CLIENTS * CALLS
        written = [w for c in clients for w in c.written]
        assert len(written) == CLIENTS * ROUNDS * 2  # a remember and a correction a round

        # Through the API: every acknowledged version, with its words, in its person's list.
        seen: dict[str, dict[int, tuple[str, str | None]]] = {}
        for seat in range(CLIENTS):
            seen.setdefault(user_of(seat), {}).update(versions_through_the_api(server, seat))
        missing = [w for w in written if seen[w.user].get(w.fact_id) != (w.key, w.content)]
        assert missing == []
        # And each client's last key's history: the remembered version, then the correction.
        for client in clients:
            remembered, corrected = client.written[-2:]
            with client_for(server, client.seat) as http:
                history = http.get(f"/v1/facts/{corrected.fact_id}/history")
            assert history.status_code == 200, history.text
            assert [(f["id"], f["content"], f["current"]) for f in history.json()["facts"]] == [
                (remembered.fact_id, remembered.content, False),
                (corrected.fact_id, corrected.content, True),
            ]

    # In the database, read by an engine of its own once the server has stopped.
    with MemoryEngine(db_url) as engine:
        for user in {w.user for w in written}:
            who = Identity(ACCOUNT, user, AGENT)
            kept = {f.id: f for f in engine.get_facts(who, include_invalidated=True)}
            mine = [w for w in written if w.user == user]
            assert [w for w in mine if w.fact_id not in kept] == []
            assert [w for w in mine if kept[w.fact_id].content != w.content] == []
            assert len(kept) == len(mine)  # and nothing the server did not acknowledge
            for key in {w.key for w in mine}:
                assert [f.content for f in engine.history(who, key)] == [
                    w.content for w in mine if w.key == key
                ]
