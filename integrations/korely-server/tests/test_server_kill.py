"""A server killed with SIGKILL in the middle of writes loses none it acknowledged: every fact
whose 201 reached its client is in the database afterwards, the database opens and passes
`korely db check`, and a new server on it serves again.
"""

from __future__ import annotations

import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from korely_memory import Identity, MemoryEngine
from tests.cli_helpers import korely

from .servers import ACCOUNT, AGENT, Server, running

# (token, user_id) of each writer: the backend for three people, and Giulia's own client.
WRITERS = [("backend", "kill-a"), ("backend", "kill-b"), ("backend", "kill-c"), ("giulia", None)]
ACKNOWLEDGED_BEFORE_KILL = 40  # writes acknowledged before the kill's random moment starts


def write_until_refused(
    server: Server, writer: int, acknowledged: list[tuple[str, str, str, int]]
) -> int:
    """Remember facts under new keys until the server stops answering; every 201 goes in
    ``acknowledged`` as (user, key, content, id). Returns how many calls failed otherwise."""
    token, user_id = WRITERS[writer]
    params = {} if user_id is None else {"user_id": user_id}
    user = user_id or token
    refused = 0
    with server.client(token, params=params) as http:
        for n in range(100_000):
            key, content = f"writer-{writer}-{n:05d}", f"{user} wrote note {n}"
            try:
                answer = http.post("/v1/facts", json={"key": key, "content": content})
            except httpx.TransportError:
                return refused  # the server is gone
            if answer.status_code == 201:
                acknowledged.append((user, key, content, answer.json()["id"]))
            else:
                refused += 1
    return refused


@pytest.mark.timeout(90)
def test_a_server_killed_mid_write_loses_no_acknowledged_write(db_url: str, tmp_path: Path) -> None:
    acknowledged: list[tuple[str, str, str, int]] = []
    delay = random.uniform(0.0, 0.5)
    with running(db_url, tmp_path, admin=False) as server, ThreadPoolExecutor(len(WRITERS)) as pool:
        writers = [
            pool.submit(write_until_refused, server, writer, acknowledged)
            for writer in range(len(WRITERS))
        ]
        deadline = time.monotonic() + 30
        while len(acknowledged) < ACKNOWLEDGED_BEFORE_KILL and time.monotonic() < deadline:
            assert not any(w.done() for w in writers), [w.result() for w in writers]
            time.sleep(0.01)
        assert len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL, server.log.read_text()
        time.sleep(delay)
        os.kill(server.pid, signal.SIGKILL)
        # The launcher ends as its program did: by the same signal.
        assert server.process.wait(timeout=20) == -signal.SIGKILL
        assert [w.result(timeout=30) for w in writers] == [0] * len(WRITERS)
    said = f"killed {delay:.3f} s after {ACKNOWLEDGED_BEFORE_KILL} writes"

    with MemoryEngine(db_url) as engine:
        for user in {user for user, *_ in acknowledged}:
            kept = {
                f.id: (f.key, f.content)
                for f in engine.get_facts(Identity(ACCOUNT, user, AGENT), include_invalidated=True)
            }
            lost = [
                (key, fact_id)
                for u, key, content, fact_id in acknowledged
                if u == user and kept.get(fact_id) != (key, content)
            ]
            assert lost == [], said
    assert korely("--url", db_url, "db", "check").exit_code == 0

    # A second server on the same database serves what was kept, and takes new writes.
    user, key, content, fact_id = acknowledged[-1]
    token, user_id = next(w for w in WRITERS if (w[1] or w[0]) == user)
    params = {} if user_id is None else {"user_id": user_id}
    again = tmp_path / "again"
    again.mkdir()
    with running(db_url, again) as server, server.client(token, params=params) as http:
        history = http.get(f"/v1/facts/{fact_id}/history")
        assert history.status_code == 200, history.text
        assert [(f["key"], f["content"]) for f in history.json()["facts"]] == [(key, content)]
        made = http.post("/v1/facts", json={"key": "after-the-kill", "content": "served again"})
        assert made.status_code == 201, made.text
