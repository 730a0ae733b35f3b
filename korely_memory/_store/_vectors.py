"""Vectors kept in the database (``korely_vectors``), under the account, a text's digest and the
model named.

Only a digest of each text is kept with its vector, never the words. Each account keeps its own:
an account's vectors are where its facts are, and say nothing of another's texts. Erasing text
deletes its vectors in the account whatever the model (``forget_vectors``).
"""

from __future__ import annotations

import array
import hashlib
from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import vectors
from .._values._embedders import Vector


def load(conn: Connection, account: str, model: str, docs: Sequence[str]) -> dict[str, Vector]:
    """The vectors ``account`` keeps of those of ``docs`` that have one under ``model``."""
    hashes = {text_hash(d): d for d in docs}
    rows = conn.execute(
        sa.select(vectors.c.text_hash, vectors.c.vector).where(
            vectors.c.account == account,
            vectors.c.model == model,
            vectors.c.text_hash.in_(sorted(hashes)),
        )
    )
    return {hashes[h]: array.array("d", blob).tolist() for h, blob in rows}


def save(conn: Connection, model: str | None, todo: Mapping[tuple[str, str], Vector]) -> None:
    """Keep these vectors (by account and text digest) under ``model``; one kept already stays as
    it was."""
    insert = _database.insert_ignoring_duplicates(conn, vectors)
    conn.execute(
        insert,
        [
            {"account": a, "model": model, "text_hash": h, "vector": array.array("d", v).tobytes()}
            for (a, h), v in sorted(todo.items())
        ],
    )


def forget_vectors(conn: Connection, account: str, texts: Sequence[str]) -> None:
    """Delete ``account``'s vectors of these texts, whatever the model (their words are being
    erased)."""
    hashes = sorted({text_hash(t) for t in texts})
    for start in range(0, len(hashes), 500):
        conn.execute(
            vectors.delete().where(
                vectors.c.account == account, vectors.c.text_hash.in_(hashes[start : start + 500])
            )
        )


def text_hash(text: str) -> str:
    """The key a text's vector is kept under: no words, only a digest."""
    return hashlib.sha256(text.encode()).hexdigest()
