"""MemoryEngine: the one entry object. It owns connections and transactions.

Every write runs in one transaction (``_database.run_write``): a caller never
sees half a change, and a failure leaves the database as it was. A read runs
in one snapshot; a read with a reader then writes its marks in a short
transaction of its own that gives way rather than fail the read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import URL

from .._db import _database, _migrations
from .._read import _read_path
from .._read._ranking import Ranking
from .._store import _word_index, _writes
from .._store._word_index import AS_RECORDED, _AsRecorded
from .._text._tokens import TokenCounter
from .._text._words import Words
from .._values import _validation
from .._values._embedders import Embedder, check_embed
from .._values._errors import InvalidRequest
from .._values._types import Fact
from .approvals import ApprovalMethods
from .context import ContextMethods
from .core import Clock, _twin
from .facts import FactMethods
from .items import Items
from .listings import Listings
from .memories import MemoryMethods
from .review import ReviewMethods
from .upkeep import UpkeepMethods

IsAdmin = Callable[[str, str], bool]


def utcnow() -> dt.datetime:
    """The system clock, in UTC."""
    return dt.datetime.now(dt.timezone.utc)


class MemoryEngine(
    FactMethods,
    ReviewMethods,
    ContextMethods,
    MemoryMethods,
    ApprovalMethods,
    UpkeepMethods,
):
    """Durable, correctable memory for agents.

    Args:
        url: A SQLAlchemy URL. ``None`` opens ``$KORELY_DATABASE_URL``, else
            the SQLite file ``./korely-memory.db``. A ``postgresql://`` URL
            needs the ``postgres`` extra (psycopg 3); in a SQLite URL a leading
            ``~`` is the home folder. The schema is created on first use; see
            ``auto_upgrade`` for one made by an earlier version.
        tokenizer: Counts the tokens of a text (``token_budget`` is in these);
            by default tiktoken's ``cl100k_base``, shipped offline.
        embed: Ranks facts and memories by meaning instead of words: a
            LangChain ``Embeddings``, a LlamaIndex embedding, or a function
            from a list of texts to a list of vectors.
        is_admin: ``is_admin(account, user) -> bool``, the application's own
            rule for who administers an account, instead of ``grant_admin``.
        write_wait: Seconds a writer waits for another writer's lock.
        clock: Where the engine takes the time of what it records, holds and
            marks, in UTC. By default one clock for every process: on PostgreSQL
            the database server's, on SQLite the system clock of the machine its
            processes share. A version never ends before it was recorded,
            whatever the clock says.
        language: The language words are stemmed in, for the word indexes and
            relevance (a Snowball stemmer name such as ``"english"``,
            ``"italian"``, ``"german"``), or None to only fold case and accents.
            A database records the language it was created with; by default
            the engine uses it (English for a new database), and a different
            one is refused, so that index and queries always agree.
        embed_model: A name for the embedding model of ``embed``: with one,
            vectors are kept in the database under that name, so a new process
            does not embed every stored text again. Change it when the model
            changes.
        auto_upgrade: Upgrade a database whose schema an earlier version made,
            at start, under a lock; False refuses it with a ``SchemaVersionError``
            naming ``korely db upgrade``. By default True for SQLite and False for
            PostgreSQL, where upgrading is a deployment step: processes of the
            earlier version may still be running. A schema newer than this
            version knows is always refused.

    Raises:
        InvalidRequest: An argument breaks its rule (``url`` not a database
            URL, or one of a database, driver or server the engine does not run
            on: SQLite through Python's sqlite3, PostgreSQL 12 or later through
            psycopg 3; ``write_wait`` not a positive number of seconds, a ``language``
            the engine does not know or that differs from the database's,
            something not callable where a callable goes, an ``embed`` that is none
            of the embedders the engine takes); ``field`` names it.
        SchemaVersionError: The database's schema is not one this version works
            with (see ``auto_upgrade``).

    Example:
        ```python
        engine = MemoryEngine("sqlite:///memory.db")
        who = Identity(account="acme", user="giulia", agent="support-copilot")
        engine.remember(who, "home-city", "Giulia lives in Rome")
        print(engine.get_context(who, "Where does Giulia live?").text)
        ```
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        tokenizer: Callable[[str], int] | None = None,
        embed: Embedder | None = None,
        is_admin: IsAdmin | None = None,
        write_wait: float = _database.WRITE_WAIT,
        clock: Clock | None = None,
        language: str | _AsRecorded | None = AS_RECORDED,
        embed_model: str | None = None,
        auto_upgrade: bool | None = None,
    ) -> None:
        for field, value in (("tokenizer", tokenizer), ("is_admin", is_admin), ("clock", clock)):
            if value is not None and not callable(value):
                raise InvalidRequest(field, f"must be callable, not {type(value).__name__}")
        if isinstance(write_wait, bool) or not isinstance(write_wait, (int, float)):
            raise InvalidRequest("write_wait", f"must be a number of seconds, not {write_wait!r}")
        if not 0 < write_wait <= 3600:
            raise InvalidRequest(
                "write_wait", f"must be more than 0 and at most 3600, got {write_wait}"
            )
        _validation.name("embed_model", embed_model, optional=True)
        check_embed(embed)
        self.url = _database.resolve_url(url)
        self.db = _database.create(self.url, write_wait=write_wait)
        self._closed = False
        _database.close_on_return(self.db, lambda: self._closed)
        self._write_wait = write_wait
        self._is_admin = is_admin
        self._clock = clock
        self._system_clock = utcnow
        self._server_clock = self.db.dialect.name == "postgresql"
        self._tokens = TokenCounter(tokenizer)
        # Versions handed over by reads whose marks gave way, marked by the reader's next read.
        self._owed: OrderedDict[tuple[str, str], dict[int, Fact]] = OrderedDict()
        self._owed_lock = threading.Lock()
        self._blocks = _read_path.BlockCache()
        memory = _database.is_memory_sqlite(self.url)
        # In-memory SQLite is one connection shared by every thread: take turns on it.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if memory else contextlib.nullcontext()
        )
        # A kept block's look-up on a SQLite file is a few microseconds of C between Python:
        # threads that take turns at it read more than threads that pass the GIL back and forth.
        self._turns: contextlib.AbstractContextManager[Any] = (
            threading.Lock()
            if self.db.dialect.name == "sqlite" and not memory
            else contextlib.nullcontext()
        )
        try:
            _database.check_server(self.db)  # before the schema is made or anything written
            upgrading = (
                _migrations.auto_upgrade_default(self.url)
                if auto_upgrade is None
                else _validation.flag("auto_upgrade", auto_upgrade)
            )
            _migrations.prepare(self.db, auto_upgrade=upgrading)
            # Read first: opening a database that records its language takes no write lock.
            recorded, uncounted = self._read(_word_index.recorded_at_start)
            if uncounted:
                self._write(_migrations.count_words_left)
            agreed = (
                self._write(lambda conn: _word_index.agreed_language(conn, language))
                if recorded is None
                else _word_index.agrees(language, recorded)
            )
            self._words = Words(agreed)
            self._ranking = Ranking(self._words, embed, embed_model)
        except BaseException:
            self.db.dispose()  # no connection outlives an engine that could not start
            raise
        self._writer = _writes.Writer(self._words, self._now, self._admin)
        self._items = Items(self)
        self._listings = Listings(self)

    @property
    def items(self) -> Items:
        """The items of LangGraph stores (``KorelyStore``'s): one ``Items`` per engine."""
        return self._items

    @property
    def listings(self) -> Listings:
        """Who and what the memory holds, for an operator (the ``korely`` command's lists):
        one ``Listings`` per engine."""
        return self._listings

    @property
    def language(self) -> str | None:
        """The language words are stemmed in (as the database records it), or None."""
        return self._words.language

    def count_tokens(self, text: str) -> int:
        """The engine's token count of any text: what ``token_budget`` is counted in.

        Args:
            text: Any text; it is counted, not kept.

        Returns:
            The number of tokens.

        Raises:
            InvalidRequest: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidRequest("text", f"must be a string, not {type(text).__name__}")
        return self._tokens.exact(text)

    def close(self) -> None:
        """Close every pooled connection.

        A call still running in another thread (a background capture, an
        acknowledgement, an async twin whose task was cancelled), or made after,
        closes its connection when it is done: a closed engine leaves no
        connection open.
        """
        self._closed = True
        self.db.dispose()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryEngine({self.url.render_as_string(hide_password=True)!r})"

    aremember = _twin(FactMethods.remember)
    acorrect = _twin(FactMethods.correct)
    aforget = _twin(FactMethods.forget)
    aconfirm = _twin(ReviewMethods.confirm)
    areject = _twin(ReviewMethods.reject)
    aproposals = _twin(ReviewMethods.proposals)
    agrant_admin = _twin(ReviewMethods.grant_admin)
    arevoke_admin = _twin(ReviewMethods.revoke_admin)
    ais_admin = _twin(ReviewMethods.is_admin)
    aget_facts = _twin(FactMethods.get_facts)
    ahistory = _twin(FactMethods.history)
    aget_context = _twin(ContextMethods.get_context)
    anotes = _twin(ContextMethods.notes)
    aacknowledge = _twin(ContextMethods.acknowledge)
    arelease = _twin(ContextMethods.release)
    aadd_memory = _twin(MemoryMethods.add_memory)
    aforget_memory = _twin(MemoryMethods.forget_memory)
    asearch_memories = _twin(MemoryMethods.search_memories)
    asearch = _twin(MemoryMethods.search)
    acapture = _twin(MemoryMethods.capture)
    apending = _twin(ApprovalMethods.pending)
    aapprove = _twin(ApprovalMethods.approve)
    adecline = _twin(ApprovalMethods.decline)
    aerase_user = _twin(UpkeepMethods.erase_user)
    aexport_user = _twin(UpkeepMethods.export_user)
    aimport_user = _twin(UpkeepMethods.import_user)
    ascrub = _twin(UpkeepMethods.scrub)
    adelete_reader = _twin(UpkeepMethods.delete_reader)
    atrim = _twin(UpkeepMethods.trim)
