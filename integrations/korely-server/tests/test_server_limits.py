"""Requests the server takes are bounded: a body over ``--max-body`` (256 KiB by default) is
refused with 413 before any route reads it, and writes nothing; a request line or a header
block past the HTTP parser's bound (h11's 16 KiB) is refused with 400 at once, not waited on.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from korely_server import MAX_BODY

from .servers import Server, running

TOO_LARGE = "Request body too large"
ONE_MB = 1_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module's tests, on a SQLite file of its own: the bounds are HTTP's, the
    same on either database. Each test writes for a person of its own."""
    folder = tmp_path_factory.mktemp("limits")
    with running(f"sqlite:///{folder / 'korely.db'}", folder) as started:
        yield started


def padded(size: int, **fields: Any) -> bytes:
    """A JSON object of ``fields`` exactly ``size`` bytes long (spaces before its last brace)."""
    body = json.dumps(fields).encode()
    assert len(body) <= size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def post(server: Server, user: str, path: str, body: bytes, **headers: str) -> httpx.Response:
    with server.client("backend", params={"user_id": user}) as http:
        return http.post(
            path, content=body, headers={"Content-Type": "application/json", **headers}
        )


def facts_of(server: Server, user: str) -> list[Any]:
    with server.client("backend", params={"user_id": user}) as http:
        answer = http.get("/v1/facts", params={"include_invalidated": True})
    assert answer.status_code == 200, answer.text
    facts: list[Any] = answer.json()["facts"]
    return facts


def test_a_body_one_byte_over_the_limit_is_refused_and_writes_nothing(server: Server) -> None:
    body = padded(MAX_BODY + 1, key="home-city", content="Giulia lives in Milan")
    answer = post(server, "over", "/v1/facts", body)
    assert (answer.status_code, answer.text) == (413, TOO_LARGE)
    assert facts_of(server, "over") == []


def test_a_valid_body_of_exactly_the_limit_is_taken(server: Server) -> None:
    body = padded(MAX_BODY, key="home-city", content="Giulia lives in Milan")
    answer = post(server, "edge", "/v1/facts", body)
    assert answer.status_code == 201, answer.text
    assert [f["content"] for f in facts_of(server, "edge")] == ["Giulia lives in Milan"]


def test_a_body_sent_in_chunks_is_counted_as_it_comes(server: Server) -> None:
    """No Content-Length to go by: the server counts what arrives and stops past the limit."""
    body = padded(MAX_BODY + 1, key="home-city", content="Giulia lives in Milan")
    chunks = iter([body[i : i + 65536] for i in range(0, len(body), 65536)])
    answer = post(server, "chunked", "/v1/facts", chunks)  # type: ignore[arg-type]
    assert (answer.status_code, answer.text) == (413, TOO_LARGE)
    assert facts_of(server, "chunked") == []


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/v1/facts", {"key": "home-city", "content": "x" * ONE_MB}),
        ("/v1/memories", {"content": "x" * ONE_MB}),
        ("/v1/memories/search", {"query": "x" * ONE_MB}),
        ("/v1/search", {"query": "x" * ONE_MB}),
    ],
)
def test_a_one_megabyte_string_in_a_field_is_refused_with_413(
    server: Server, path: str, fields: dict[str, str]
) -> None:
    answer = post(server, "megabyte", path, json.dumps(fields).encode())
    assert (answer.status_code, answer.text) == (413, TOO_LARGE)
    assert facts_of(server, "megabyte") == []


def test_max_body_sets_the_limit(sqlite_url: str, tmp_path: Path) -> None:
    with running(sqlite_url, tmp_path, "--max-body", "2048") as small:
        over = post(small, "small", "/v1/facts", padded(2049, key="k", content="over"))
        assert (over.status_code, over.text) == (413, TOO_LARGE)
        taken = post(small, "small", "/v1/facts", padded(2048, key="k", content="at the limit"))
        assert taken.status_code == 201, taken.text
        assert [f["content"] for f in facts_of(small, "small")] == ["at the limit"]


def raw(server: Server, head: str) -> bytes:
    """What the server answers the request ``head`` on a connection of its own, read until it
    closes; b"" when it reset the connection (it refused the request before reading all of it).
    A server that waited instead would fail the read's timeout."""
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    answer = b""
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        try:
            sock.sendall(head.encode())
            while chunk := sock.recv(65536):
                answer += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass
    return answer


def refused(answer: bytes) -> bool:
    return answer == b"" or answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")


@pytest.mark.parametrize(
    "head",
    [
        "GET /v1/facts?user_id=" + "u" * ONE_MB + " HTTP/1.1\r\nHost: {host}\r\n\r\n",
        "GET /v1/facts HTTP/1.1\r\nHost: {host}\r\nX-Pad: " + "p" * ONE_MB + "\r\n\r\n",
        "GET /v1/facts HTTP/1.1\r\nHost: {host}\r\n" + "X-Pad: p\r\n" * 100_000 + "\r\n",
    ],
    ids=["query string", "header", "headers"],
)
def test_an_overlong_request_head_is_refused_at_once(server: Server, head: str) -> None:
    answer = raw(server, head.replace("{host}", urlsplit(server.url).netloc))
    assert refused(answer), answer[:200]
