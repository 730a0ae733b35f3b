"""Erasing a person's words from LlamaIndex's own chat store, beside ``erase_user``.

``MemoryEngine.erase_user`` removes everything korely-memory keeps about a
person. The conversations themselves are kept by ``Memory``'s chat store
(``SQLAlchemyChatStore``, table ``llama_index_memory`` by default), by session
id, with no column that says whose they are: the application knows which
sessions were the person's, and erases them here.
"""

from __future__ import annotations

from collections.abc import Iterable

from llama_index.core.async_utils import asyncio_run
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

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
