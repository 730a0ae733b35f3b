"""Erasing a person's words from LlamaIndex's own chat store, beside ``erase_user``.

``MemoryEngine.erase_user`` removes everything korely-memory keeps about a
person. The conversations themselves are kept by ``Memory``'s chat store
(``SQLAlchemyChatStore``, table ``llama_index_memory`` by default), by session
id, with no column that says whose they are: the application knows which
sessions were the person's, and erases them here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore
from llama_index.core.storage.chat_store.sql import (
    DEFAULT_ASYNC_DATABASE_URI,
    SQLAlchemyChatStore,
)
from sqlalchemy import MetaData, Table, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from korely_memory import InvalidRequest


async def aerase_chat_sessions(chat_store: AsyncDBChatStore, session_ids: Iterable[str]) -> int:
    """Delete every message of these sessions, active and archived, from a chat store.

    Args:
        chat_store: The store of the ``Memory`` the conversations were held in
            (``memory.sql_store``).
        session_ids: The sessions to erase (the ``session_id`` of each ``Memory``).

    Returns:
        How many messages were deleted.

    Raises:
        InvalidRequest: A session id that is not a non-empty string (nothing is deleted).
    """
    sessions = list(session_ids) if not isinstance(session_ids, str) else [session_ids]
    for session in sessions:
        if not isinstance(session, str) or not session:
            raise InvalidRequest("session_ids", f"must be non-empty strings, got {session!r:.40}")
    deleted = 0
    for session in dict.fromkeys(sessions):
        deleted += await chat_store.count_messages(session, status=None)
        await chat_store.delete_messages(session)
    return deleted


def erase_chat_sessions(chat_store: AsyncDBChatStore, session_ids: Iterable[str]) -> int:
    """Synchronous twin of :func:`aerase_chat_sessions`."""
    deleted: int = asyncio_run(aerase_chat_sessions(chat_store, session_ids))
    return deleted


DEFAULT_TABLE_NAME = "llama_index_memory"
"""The table ``Memory.from_defaults`` keeps its messages in, unless told another."""

SQLITE_WAIT = 30.0
"""Seconds a connection of a SQLite chat store waits for another's write before it fails."""


class SharedChatStore(SQLAlchemyChatStore):
    """LlamaIndex's ``SQLAlchemyChatStore``, for many memories on one database at once.

    Each ``Memory`` made by ``Memory.from_defaults`` makes a store of its own, which creates its
    table at its first use: forty memories started together on one SQLite file race to create it
    (``table llama_index_memory already exists``), and on SQLite wait five seconds at most for
    each other's writes, or fail at once when two that read then write deadlock (``database is
    locked``). This store takes a table another store (or process) created meanwhile as created,
    and on a SQLite file begins each transaction as a writer and waits ``SQLITE_WAIT``.
    Every store of ``KorelyMemory.from_defaults`` is one, unless ``chat_store`` is given.
    """

    def __init__(
        self,
        table_name: str,
        async_database_uri: str | None = None,
        async_engine: AsyncEngine | None = None,
        db_schema: str | None = None,
    ) -> None:
        uri = async_database_uri or DEFAULT_ASYNC_DATABASE_URI
        if async_engine is None and uri.startswith("sqlite") and not self._is_in_memory_uri(uri):
            async_engine = create_async_engine(uri, connect_args={"timeout": SQLITE_WAIT})
            _writers_take_turns(async_engine)
        super().__init__(
            table_name=table_name,
            async_database_uri=uri,
            async_engine=async_engine,
            db_schema=db_schema,
        )

    async def _setup_tables(self, async_engine: AsyncEngine) -> Table:
        try:
            return await super()._setup_tables(async_engine)
        except DBAPIError:
            # Another store created the table meanwhile ("already exists"; on PostgreSQL also a
            # duplicate type): defined again, it is found now, not created. Anything else fails
            # again, and is raised.
            self._metadata = MetaData()
            return await super()._setup_tables(async_engine)


def _writers_take_turns(async_engine: AsyncEngine) -> None:
    """Each transaction on the SQLite file starts as a writer (``BEGIN IMMEDIATE``), so that it
    waits its turn instead of failing: two transactions that read and then write would otherwise
    deadlock, and SQLite fails one at once, without waiting."""

    @event.listens_for(async_engine.sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the transactions are begun below

    @event.listens_for(async_engine.sync_engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
