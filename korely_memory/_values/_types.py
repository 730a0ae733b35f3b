"""The values the engine returns. Plain frozen dataclasses, detached from any session."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._errors import NotRefittable
from ._identity import EndCause, Scope


@dataclass(frozen=True)
class Fact:
    """One version of a fact. ``invalid_at`` is None while it holds.

    A version recorded with ``valid_until`` expires then: a read of a later moment
    sees it ended (``end_cause`` ``expired``, ``invalid_at`` its ``valid_until``).

    ``content`` is empty for a version whose words were removed: forgotten with
    ``erase=True``, or read from a memory that was forgotten (``erased`` says so).
    """

    id: int
    account: str
    owner: str | None
    agent: str
    key: str
    content: str
    scope: Scope | None
    valid_from: dt.datetime
    invalid_at: dt.datetime | None
    recorded_at: dt.datetime
    ended_recorded_at: dt.datetime | None
    end_cause: EndCause | None
    replaced_by_id: int | None
    source_memory_id: int | None
    confirmed_by: str | None
    confirmed_at: dt.datetime | None
    created_at: dt.datetime
    modified_at: dt.datetime
    valid_until: dt.datetime | None = None
    """When it stops being true, as recorded with it; None: until something ends it."""

    @property
    def effective_scope(self) -> Scope:
        """The scope every decision uses: rows written before scopes existed read as ``user``."""
        return self.scope if self.scope is not None else Scope.USER

    @property
    def is_current(self) -> bool:
        """True while this version is the one the store holds for its key."""
        return self.ended_recorded_at is None

    @property
    def erased(self) -> bool:
        """True when this version's words were removed; it is kept only to say that it existed."""
        return self.content == ""

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> Fact:
        """A Fact from its fields by name, stored scope and cause as text (the dict is used up).

        A block reads many rows: this skips the generated ``__init__`` and its per-field work.
        """
        fact = object.__new__(cls)
        scope, cause = fields["scope"], fields["end_cause"]
        fields["scope"] = _SCOPES[scope] if scope in _SCOPES else Scope(scope)
        fields["end_cause"] = _CAUSES[cause] if cause in _CAUSES else EndCause(cause)
        fact.__dict__.update(fields)
        return fact

    @classmethod
    def from_row(cls, row: Any) -> Fact:
        """A Fact from a database row that holds (at least) every field."""
        m = row._mapping
        return cls.from_fields({name: m[name] for name in FACT_FIELDS})


_SCOPES: dict[str | None, Scope | None] = {None: None, **{s.value: s for s in Scope}}
_CAUSES: dict[str | None, EndCause | None] = {None: None, **{c.value: c for c in EndCause}}
FACT_FIELDS = tuple(f.name for f in dataclasses.fields(Fact))


@dataclass(frozen=True)
class Memory:
    """Free text kept for recall, scoped like a user fact."""

    id: int
    account: str
    owner: str | None
    agent: str
    content: str
    created_at: dt.datetime

    @classmethod
    def from_row(cls, row: Any) -> Memory:
        """A Memory from a database row of the memories table."""
        m = row._mapping
        return cls(m["id"], m["account"], m["owner"], m["agent"], m["content"], m["created_at"])


@dataclass(frozen=True)
class Change:
    """A fact this reader was handed that has ended since.

    ``now`` is the fact true now at the end of the chain of replacements, or
    None when nothing this identity can see holds now. ``cause`` is why the
    last version of the chain ended, ``day`` when the store learned it.
    """

    was: Fact
    now: Fact | None
    day: dt.date
    cause: EndCause


@dataclass(frozen=True)
class Note:
    """What one turn of a conversation was shown: a block holding only what the conversation had
    not been shown, attached to one of its messages (``get_context(..., conversation=...)``).

    An adapter puts each earlier note back where it was, byte for byte, so that the prompt
    before the newest message stays the same from one model call to the next.

    Attributes:
        conversation: The conversation's id, as the application names it (a thread id).
        agent: The agent definition it was read through.
        seq: Its place among the conversation's notes, from 1.
        anchor: The message it is attached to, as the adapter names it (a message id).
        text: The note, as it goes into the prompt ("" when there was nothing new to show).
        facts: The ids of the fact versions it shows (in fact lines and as what a change
            line says now).
        memories: The ids of the memories it shows.
        changed: The ids of the versions whose change it tells (``was``).
        created_at: When it was written.
    """

    conversation: str
    agent: str
    seq: int
    anchor: str | None
    text: str
    facts: tuple[int, ...] = ()
    memories: tuple[int, ...] = ()
    changed: tuple[int, ...] = ()
    created_at: dt.datetime | None = None


CHANGED = "## Changed since you last read"
KNOWN = "## Known facts"
MEMORIES = "## Relevant memories"
HEADERS = (CHANGED, KNOWN, MEMORIES)
"""The headers of a block's sections, in the order they come (``ContextBlock`` splits on
``MEMORIES``)."""


@dataclass(frozen=True)
class ContextBlock:
    """What an agent is handed at the start of a conversation.

    ``text == stable + "\\n\\n" + volatile`` when both are present, and
    ``tokens`` is the exact token count of ``text``, never above the budget.

    Attributes:
        text: The whole block, ready for a system prompt.
        tokens: The exact count of ``text`` with the engine's tokenizer.
        stable: The fixed note that opens every block; it never depends on the
            query or the facts, so it can sit in a cached prompt prefix.
        volatile: Everything after the note: changes, facts, memories
            (``facts_text`` and ``memories_text``, a blank line between them).
        facts: The facts shown, in the order shown.
        memories: The memories shown.
        changed: The changes shown ("Changed since you last read").
        changed_more: How many more changes wait to be told; None when they
            could not be counted because the read gave way.
        omitted: True facts left out for room.
        receipt: With ``hold=``, what ``acknowledge`` takes to spend the
            changes shown; None when nothing is held.
        gave_way: True when the read's mark step gave way to a busy lock or
            a lost connection: nothing was marked or told by this read.
        note: With ``conversation=``, the note this block is: ``volatile`` holds
            only what the conversation had not been shown, and the engine keeps it.
    """

    text: str
    tokens: int
    stable: str
    volatile: str
    facts: tuple[Fact, ...] = ()
    memories: tuple[Memory, ...] = ()
    changed: tuple[Change, ...] = ()
    changed_more: int | None = 0
    omitted: int = 0
    receipt: str | None = None
    gave_way: bool = False
    note: Note | None = None
    _refit: Refit | None = field(default=None, compare=False, repr=False)
    """How the engine fits this block to less room (``fit``): part of the value, so that a copy,
    a ``dataclasses.replace`` and a pickle fit as the block does; None for a block built by
    hand."""

    def __str__(self) -> str:
        return self.text

    def __copy__(self) -> ContextBlock:
        return dataclasses.replace(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> ContextBlock:
        return dataclasses.replace(self)  # every field is immutable (the tokenizer is shared)

    @property
    def facts_text(self) -> str:
        """The changes and the known facts: the part of ``volatile`` the store vouches for
        (facts kept under keys, reviewed when they are the account's); "" when there is none."""
        return self._parts()[0]

    @property
    def memories_text(self) -> str:
        """The relevant memories: words people said in conversations, and notes, quoted. Put it
        where the user's words go, never in a system message; "" when there is none."""
        return self._parts()[1]

    def _parts(self) -> tuple[str, str]:
        if self.volatile.startswith(MEMORIES):
            return "", self.volatile
        facts, found, memories = self.volatile.partition("\n\n" + MEMORIES)
        return (facts, MEMORIES + memories) if found else (facts, "")

    def fit(self, room: int) -> ContextBlock:
        """This block in at most ``room`` tokens, giving up its least needed lines first.

        Memories go first, then the least relevant facts, then changes; the
        stable note always stays, so a ``room`` smaller than the note leaves
        the note alone. The block returned
        reports what it shows: ``omitted`` counts the facts given up too, and
        its ``receipt`` spends only the changes it still shows. A block that
        already fits is returned as it is. A block keeps what fitting it takes
        (its lines, the tokenizer, its receipts): a copy, a ``dataclasses.replace``
        and a pickle fit as it does (a tokenizer of yours rides along in a pickle
        when it is a module's function).

        Args:
            room: The most tokens the block may take.

        Returns:
            The block, re-rendered to fit.

        Raises:
            NotRefittable: The block takes more than ``room`` and cannot be
                fitted: it is a conversation's note (kept as it was shown), or it
                is not as the engine rendered it (built by hand, its text replaced,
                or read back from a pickle without its tokenizer).
        """
        if self.tokens <= room:
            return self
        said = f"it takes {self.tokens} tokens, room is {room}"
        if self.note is not None:
            raise NotRefittable(
                f"a conversation's note is kept as it was shown and never fitted to less room "
                f"({said}): read the turn with a smaller token_budget",
                room=room,
                tokens=self.tokens,
            )
        if self._refit is None or self._refit.text != self.text:
            why = (
                "its text was replaced"
                if self._refit is not None
                else "it was built by hand, or read back from a pickle without its tokenizer "
                "(one of yours rides along when it is a module's function)"
            )
            raise NotRefittable(
                f"this block cannot be fitted to less room ({said}): {why}; read it again "
                "with a smaller token_budget",
                room=room,
                tokens=self.tokens,
            )
        return self._refit(self, room)


class Refit(Protocol):
    """How a block the engine rendered is fitted to less room (``ContextBlock._refit``)."""

    @property
    def text(self) -> str:
        """The text of the block it was rendered with: a block whose text was replaced since is
        not refitted."""

    def __call__(self, block: ContextBlock, room: int) -> ContextBlock: ...


@dataclass(frozen=True)
class SearchResult:
    """What ``search`` found: facts and memories, each most relevant first."""

    facts: tuple[Fact, ...] = ()
    memories: tuple[Memory, ...] = ()


@dataclass(frozen=True)
class Operation:
    """One change an extractor proposes to a person's facts, from a conversation excerpt.

    ``action`` is ``"record"`` (a new key), ``"replace"`` (an existing key, new
    content) or ``"end"`` (an existing key no longer holds); ``scope`` is None
    (about the person) or ``"account"`` (about the whole account: a proposal
    an administrator reviews).
    """

    action: str
    key: str
    content: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class PendingFact:
    """A change to a person's own fact that ``capture(..., hold_for_owner=True)`` drew from a
    conversation, held for the person's approval.

    Until ``approve`` writes it, nothing of it is shown: no block, search, fact list,
    history or notice holds it; ``decline`` drops it. It is the person's data: exported
    with them and erased with them.

    Attributes:
        id: Its id, what ``approve`` and ``decline`` take.
        account: The account.
        user: The person it is about (None: an agent's memory with no end user).
        agent: The agent definition it was captured through.
        operation: ``remember`` (a new key), ``correct`` (new words for a true fact) or
            ``forget`` (the fact no longer holds).
        key: The key of the fact.
        content: The fact's words; None for ``forget``.
        captured_at: When it was captured.
        reader: The reader name of the agent that captured it, or None.
        drawn_against: The version of the person's fact under ``key`` it was drawn against
            (None: the key held none). ``approve`` writes it only while that version is the
            one that holds; once another was written (or it ended), approving it is refused.
    """

    id: int
    account: str
    user: str | None
    agent: str
    operation: str
    key: str
    content: str | None
    captured_at: dt.datetime
    reader: str | None = None
    drawn_against: int | None = None


PENDING_OPERATIONS = ("remember", "correct", "forget")
"""What a ``PendingFact`` does once approved."""


@dataclass(frozen=True)
class CaptureStep:
    """What ``capture`` did (or, with ``dry_run``, would do) with one operation.

    ``outcome`` is ``recorded``, ``replaced``, ``proposed`` (for an
    administrator's review), ``ended``, ``unchanged`` (the key already said
    it), ``held`` (with ``hold_for_owner``: kept for the person's approval,
    ``pending`` says as what; the same change already held is not held again,
    and ``pending`` is that one) or ``refused`` (``reason`` says why; nothing
    was written for it).
    """

    operation: Operation
    outcome: str
    fact: Fact | None = None
    reason: str | None = None
    pending: PendingFact | None = None


@dataclass(frozen=True)
class CaptureReport:
    """What ``capture`` kept and did.

    ``memory`` is the excerpt kept as a memory, the source of every fact
    written (None with ``dry_run``, without ``keep_excerpt``, with
    ``hold_for_owner``, or when the excerpt was just captured: ``already_captured``).
    """

    memory: Memory | None
    steps: tuple[CaptureStep, ...] = ()
    dry_run: bool = False
    already_captured: bool = False


@dataclass(frozen=True)
class StoreItem:
    """An item of a LangGraph store as the engine keeps it (``langchain_korely.KorelyStore``).

    Its words are a fact's, the version ``fact_id``; a new version of that fact recorded
    elsewhere (corrected, or remembered again) writes its words into ``value`` too, at
    ``text_at``. Items whose fact is no longer true are not read.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: dt.datetime
    updated_at: dt.datetime
    owner: str | None
    fact_key: str
    fact_id: int
    text_at: tuple[str, ...] | None = None
    """Where in ``value`` the fact's words are (None: the value is shown as its JSON)."""
    expires_at: dt.datetime | None = None
    ttl: float | None = None
    """Minutes the item lives after it was last read or written; None: for ever."""
    index: list[str] | bool | None = None
    """What its put said to embed: None for the store's default, False for nothing, or paths."""


@dataclass(frozen=True)
class ErasureReport:
    """What ``erase_user`` removed, by kind.

    ``scrubbed`` says whether the deleted words are gone from the database's
    files too: on SQLite, once the write-ahead log was folded in and emptied;
    on PostgreSQL, never at once (deleted rows stay in dead tuples until
    ``MemoryEngine.scrub`` or ``VACUUM FULL`` rewrites the tables).
    """

    pseudonym: str
    facts: int = 0
    memories: int = 0
    marks: int = 0
    admin_grants: int = 0
    account_facts_kept: int = 0
    scrubbed: bool = False
    notes: int = 0
    """Notes of their conversations deleted."""
    items: int = 0
    """Items of LangGraph stores (``KorelyStore``) in their namespaces deleted."""
    pending: int = 0
    """Captured facts held for their approval deleted."""


@dataclass(frozen=True)
class TrimReport:
    """What ``trim`` removed, and the facts it ended."""

    marks_expired: int = 0
    marks_told: int = 0
    facts_expired: int = 0
    """Facts whose ``valid_until`` came, ended as expired (reads left them out already)."""
    notes: int = 0
    """Notes of conversations whose last note is older than 90 days."""
