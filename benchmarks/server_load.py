"""Workload: `korely-server` under load, over HTTP on loopback.

The server is a process of its own (``python -m korely_server``, one uvicorn worker), started on
a fresh database where each of 21 people has the 40 facts of the ``reads`` workload. One client
alone, then 20 clients at once, each a thread with its own HTTP connection and the application's
backend token naming its own person, make 50 calls each, in rounds of five: remember a new key,
correct it, read the context block with a query, list the facts (a page of 100), search. The
figures are the calls per second of each run's wall time, and each route's latency percentiles as
the clients saw them (the clients share the machine with the server: on 2 vCPU they take part of
it).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from korely_mcp import hash_token, new_token
from korely_memory import MemoryEngine

from .base import Databases, Sizes, Table
from .data import ACCOUNT, AGENT, items, load

ROUTES = ("remember", "correct", "get_context", "get_facts", "search")
FACTS = 40


@dataclass
class Seen:
    """One client's run: each route's latencies in ms, and the calls that were not a 2xx."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {r: [] for r in ROUTES})
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def server(url: str, folder: str) -> Iterator[tuple[str, str]]:
    """A `korely-server` on ``url``: yields its base URL and a token for any user of the
    account; stops it after."""
    token = new_token()
    tokens = Path(folder) / f"tokens-{os.getpid()}-{time.monotonic_ns()}.json"
    entry = {
        "name": "backend",
        "sha256": hash_token(token),
        "account": ACCOUNT,
        "user": None,
        "agent": AGENT,
        "reader": "backend",
        "any_user": True,
    }
    tokens.write_text(json.dumps({"tokens": [entry]}))
    tokens.chmod(0o600)
    log = tokens.with_suffix(".log")
    command = ["-m", "korely_server", "--tokens", str(tokens), "--port", "0", "--url", url]
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        yield _serving(process, log), token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serving(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("korely-server: serving "):
                return line.split()[2]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"korely-server did not start: {log.read_text()}")


def client(base: str, token: str, user: str, calls: int, start: threading.Barrier) -> Seen:
    """``calls`` calls for ``user`` in rounds of five, each route's latency kept."""
    seen = Seen()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(
        base_url=base, headers=headers, params={"user_id": user}, timeout=120
    ) as http:
        http.get("/v1/facts", params={"limit": 1})  # the connection is open before the start

        def call(route: str, method: str, path: str, **kwargs: object) -> httpx.Response | None:
            t = time.perf_counter_ns()
            try:
                answer = http.request(method, path, **kwargs)  # type: ignore[arg-type]
            except httpx.HTTPError as error:
                seen.errors.append(f"{route}: {error!r}")
                return None
            seen.latencies[route].append((time.perf_counter_ns() - t) / 1e6)
            if not answer.is_success:
                seen.errors.append(f"{route}: {answer.status_code} {answer.text[:200]}")
                return None
            return answer

        start.wait()
        for r in range(calls // len(ROUTES)):
            made = call(
                "remember",
                "POST",
                "/v1/facts",
                json={"key": f"load-{r}", "content": f"{user} keeps parcel {r} at the desk"},
            )
            if made is not None:
                fixed = f"{user} collected parcel {r}"
                call("correct", "PATCH", f"/v1/facts/{made.json()['id']}", json={"content": fixed})
            query = f"Where is parcel {r}, and which invoices on paper?"
            call("get_context", "GET", "/v1/context", params={"query": query})
            call("get_facts", "GET", "/v1/facts")
            call("search", "POST", "/v1/search", json={"query": f"parcel {r}", "limit": 5})
    return seen


def percentiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 and p99 of ``values``."""
    if len(values) < 2:
        return (values[0],) * 3 if values else (float("nan"),) * 3
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[94], cuts[98]


def drive(base: str, token: str, users: list[str], calls: int) -> tuple[list[Seen], float]:
    """Each of ``users`` a client making ``calls`` calls, all at once: what each saw, and the
    wall time from their start to the last answer."""
    start = threading.Barrier(len(users) + 1)
    with ThreadPoolExecutor(len(users)) as pool:
        runs = [pool.submit(client, base, token, user, calls, start) for user in users]
        start.wait()
        t = time.perf_counter()
        seen = [run.result() for run in runs]
        return seen, time.perf_counter() - t


def server_load(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """One client alone, then ``server_clients`` at once, each making ``server_calls`` calls:
    calls per second, and each route's p50 / p95 / p99."""
    n, calls = sizes.server_clients, sizes.server_calls
    users = [f"client-{i:02d}" for i in range(n + 1)]
    with dbs.fresh(backend) as url:
        with MemoryEngine(url) as engine:
            load(engine, {user: items(FACTS, seed=i) for i, user in enumerate(users)})
        with server(url, dbs.workdir) as (base, token):
            runs = [(1, *drive(base, token, users[-1:], calls))]
            runs.append((n, *drive(base, token, users[:-1], calls)))
    for clients, seen, wall in runs:
        label = f"server, {clients} client{'s' if clients > 1 else ''} x {calls} calls"
        made = sum(len(s.latencies[r]) for s in seen for r in ROUTES)
        table.put(f"{label}: calls/s", backend, made / wall, "{:,.0f}")
        errors = [error for s in seen for error in s.errors]
        table.put(f"{label}: errors (answers not 2xx)", backend, str(len(errors)))
        for error in errors[:5]:
            print(f"{backend} server: {error}", file=sys.stderr)
        for route in ROUTES:
            p50, p95, p99 = percentiles([ms for s in seen for ms in s.latencies[route]])
            table.put(
                f"{label}: {route} p50 / p95 / p99 (ms)",
                backend,
                f"{p50:.1f} / {p95:.1f} / {p99:.1f}",
            )
